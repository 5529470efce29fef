//! Runs an ExecuTorch program through libpyexec's C ABI from Rust, with the
//! functions and structs of `native/include/pyexec.h` declared by hand.
//!
//!     cargo run -- ../../native/tests/data/add_mul.pte
//!
//! The program computes forward(x, y) = (x + y, x * y) on float32 [2, 3].
//! Output 0 is written straight into a caller-owned Vec<f32> when the program
//! allows it (an unplanned output, exported with alloc_graph_output=False, as
//! in add_mul_unplanned.pte); a memory-planned output (add_mul.pte) is copied
//! into the Vec after execute. `cargo run -- --layout` prints the struct
//! layouts, which the tests compare with the C compiler's.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::mem::{offset_of, size_of};
use std::process::ExitCode;
use std::ptr;

// ---- the C ABI (pyexec.h) ------------------------------------------------

#[allow(non_camel_case_types)]
type pyexec_status = c_int;
const PYEXEC_OK: pyexec_status = 0;
const PYEXEC_VALUE_TENSOR: i32 = 4;
const PYEXEC_DTYPE_FLOAT32: i32 = 6;
const PYEXEC_MAX_DIM: usize = 16;

#[repr(C)]
#[derive(Clone, Copy)]
struct Tensor {
    dtype: i32,
    dim: i32,
    sizes: *const i64,
    data: *mut c_void,
    nbytes: usize,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct StringValue {
    data: *const c_char,
    size: usize,
}

#[repr(C)]
#[derive(Clone, Copy)]
union Payload {
    i: i64,
    d: f64,
    b: i32,
    tensor: Tensor,
    string: StringValue,
}

/// pyexec_value: the C struct's anonymous union is the field `u`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Value {
    kind: i32,
    reserved: i32,
    u: Payload,
}

/// pyexec_value_info
#[repr(C)]
#[derive(Clone, Copy)]
struct ValueInfo {
    kind: i32,
    dtype: i32,
    dim: i32,
    is_memory_planned: i32,
    is_dynamic: i32,
    is_contiguous: i32,
    is_mutated_input: i32,
    reserved: i32,
    sizes: [i64; PYEXEC_MAX_DIM],
    dim_order: [u8; PYEXEC_MAX_DIM],
    nbytes: usize,
}

#[repr(C)]
struct RawProgram {
    _opaque: [u8; 0],
}

#[repr(C)]
struct RawMethod {
    _opaque: [u8; 0],
}

extern "C" {
    fn pyexec_last_error() -> *const c_char;
    fn pyexec_version() -> *const c_char;
    fn pyexec_program_load_file(path: *const c_char, out: *mut *mut RawProgram) -> pyexec_status;
    fn pyexec_program_free(program: *mut RawProgram);
    fn pyexec_method_load(
        program: *mut RawProgram,
        name: *const c_char,
        out: *mut *mut RawMethod,
    ) -> pyexec_status;
    fn pyexec_method_free(method: *mut RawMethod);
    fn pyexec_method_input_count(method: *const RawMethod) -> usize;
    fn pyexec_method_output_count(method: *const RawMethod) -> usize;
    fn pyexec_method_input_info(
        method: *const RawMethod,
        index: usize,
        out: *mut ValueInfo,
    ) -> pyexec_status;
    fn pyexec_method_set_inputs(
        method: *mut RawMethod,
        inputs: *const Value,
        count: usize,
    ) -> pyexec_status;
    fn pyexec_method_check_bindable(method: *const RawMethod, index: usize) -> pyexec_status;
    fn pyexec_method_set_output_ptr(
        method: *mut RawMethod,
        index: usize,
        data: *mut c_void,
        nbytes: usize,
    ) -> pyexec_status;
    fn pyexec_method_execute(method: *mut RawMethod) -> pyexec_status;
    fn pyexec_method_get_output(
        method: *mut RawMethod,
        index: usize,
        out: *mut Value,
    ) -> pyexec_status;
}

// ---- a small safe wrapper --------------------------------------------------

fn last_error() -> String {
    unsafe { CStr::from_ptr(pyexec_last_error()) }
        .to_string_lossy()
        .into_owned()
}

fn check(status: pyexec_status, what: &str) -> Result<(), String> {
    if status == PYEXEC_OK {
        Ok(())
    } else {
        Err(format!("{what}: {}", last_error()))
    }
}

/// Owns a pyexec_program; must outlive its methods (Method borrows it).
struct Program(*mut RawProgram);

impl Program {
    fn load(path: &str) -> Result<Program, String> {
        let c_path = CString::new(path).map_err(|e| e.to_string())?;
        let mut raw = ptr::null_mut();
        check(
            unsafe { pyexec_program_load_file(c_path.as_ptr(), &mut raw) },
            "load",
        )?;
        Ok(Program(raw))
    }

    fn load_method(&self, name: &str) -> Result<Method<'_>, String> {
        let c_name = CString::new(name).map_err(|e| e.to_string())?;
        let mut raw = ptr::null_mut();
        check(
            unsafe { pyexec_method_load(self.0, c_name.as_ptr(), &mut raw) },
            "load_method",
        )?;
        Ok(Method {
            raw,
            _program: self,
        })
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        unsafe { pyexec_program_free(self.0) }
    }
}

struct Method<'p> {
    raw: *mut RawMethod,
    _program: &'p Program,
}

impl Drop for Method<'_> {
    fn drop(&mut self) {
        unsafe { pyexec_method_free(self.raw) }
    }
}

fn f32_tensor(data: &mut [f32], sizes: &[i64]) -> Value {
    Value {
        kind: PYEXEC_VALUE_TENSOR,
        reserved: 0,
        u: Payload {
            tensor: Tensor {
                dtype: PYEXEC_DTYPE_FLOAT32,
                dim: sizes.len() as i32,
                sizes: sizes.as_ptr(),
                data: data.as_mut_ptr().cast(),
                nbytes: std::mem::size_of_val(data),
            },
        },
    }
}

// ---- the example -----------------------------------------------------------

fn run(path: &str) -> Result<(), String> {
    let version = unsafe { CStr::from_ptr(pyexec_version()) }.to_string_lossy();
    let program = Program::load(path)?;
    let method = program.load_method("forward")?;
    let (nin, nout) = unsafe {
        (
            pyexec_method_input_count(method.raw),
            pyexec_method_output_count(method.raw),
        )
    };
    if nin != 2 || nout != 2 {
        return Err(format!(
            "expected forward(x, y) -> (x + y, x * y), got {nin} inputs and {nout} outputs"
        ));
    }
    let mut info: ValueInfo = unsafe { std::mem::zeroed() };
    check(
        unsafe { pyexec_method_input_info(method.raw, 0, &mut info) },
        "input_info",
    )?;
    let sizes: Vec<i64> = info.sizes[..info.dim as usize].to_vec();
    let numel: usize = sizes.iter().product::<i64>() as usize;
    println!(
        "libpyexec {version}: {path}, input 0 float32{sizes:?}, planned: {}",
        info.is_memory_planned == 1
    );

    // Inputs: set_inputs copies planned inputs; unplanned ones are read in
    // place, so x and y must stay alive (and unmoved) while the method may
    // execute. The same holds for `sum` once it is bound.
    let mut x: Vec<f32> = (0..numel).map(|i| i as f32 * 0.5 - 1.0).collect();
    let mut y: Vec<f32> = (0..numel).map(|i| 2.0 - i as f32).collect();
    let inputs = [f32_tensor(&mut x, &sizes), f32_tensor(&mut y, &sizes)];
    check(
        unsafe { pyexec_method_set_inputs(method.raw, inputs.as_ptr(), inputs.len()) },
        "set_inputs",
    )?;

    // Output 0 into our own Vec: bound (zero copy) when the output is bindable.
    let mut sum = vec![f32::NAN; numel];
    let bound = unsafe { pyexec_method_check_bindable(method.raw, 0) } == PYEXEC_OK;
    if bound {
        let nbytes = std::mem::size_of_val(sum.as_slice());
        let st =
            unsafe { pyexec_method_set_output_ptr(method.raw, 0, sum.as_mut_ptr().cast(), nbytes) };
        check(st, "set_output_ptr")?;
    } else {
        println!(
            "output 0 cannot be bound ({}); it is copied after execute",
            last_error()
        );
    }

    check(unsafe { pyexec_method_execute(method.raw) }, "execute")?;

    let mut out: Value = unsafe { std::mem::zeroed() };
    check(
        unsafe { pyexec_method_get_output(method.raw, 0, &mut out) },
        "get_output 0",
    )?;
    let t = unsafe { out.u.tensor };
    if out.kind != PYEXEC_VALUE_TENSOR || t.dtype != PYEXEC_DTYPE_FLOAT32 || t.nbytes < numel * 4 {
        return Err("output 0 is not a float32 tensor of the input's size".into());
    }
    if bound {
        if t.data != sum.as_mut_ptr().cast() {
            return Err("output 0 was bound but not written into the Vec".into());
        }
    } else {
        sum.copy_from_slice(unsafe { std::slice::from_raw_parts(t.data as *const f32, numel) });
    }
    check(
        unsafe { pyexec_method_get_output(method.raw, 1, &mut out) },
        "get_output 1",
    )?;
    let product: Vec<f32> =
        unsafe { std::slice::from_raw_parts(out.u.tensor.data as *const f32, numel) }.to_vec();

    for i in 0..numel {
        if sum[i] != x[i] + y[i] || product[i] != x[i] * y[i] {
            return Err(format!(
                "element {i}: got ({}, {}), expected ({}, {})",
                sum[i],
                product[i],
                x[i] + y[i],
                x[i] * y[i]
            ));
        }
    }
    println!(
        "output 0 (x + y) {}: {sum:?}",
        if bound {
            "written in place into a Vec<f32>"
        } else {
            "copied into a Vec<f32>"
        }
    );
    println!("output 1 (x * y): {product:?}");
    println!("ok: {numel} elements match");
    Ok(())
    // Dropped here: the method (freeing it never touches caller memory), then
    // the program, which must outlive its methods.
}

fn print_layout() {
    println!("sizeof(pyexec_value) {}", size_of::<Value>());
    println!("offsetof(pyexec_value, tensor) {}", offset_of!(Value, u));
    println!(
        "offsetof(pyexec_tensor, nbytes) {}",
        offset_of!(Tensor, nbytes)
    );
    println!("sizeof(pyexec_value_info) {}", size_of::<ValueInfo>());
    println!(
        "offsetof(pyexec_value_info, sizes) {}",
        offset_of!(ValueInfo, sizes)
    );
    println!(
        "offsetof(pyexec_value_info, dim_order) {}",
        offset_of!(ValueInfo, dim_order)
    );
    println!(
        "offsetof(pyexec_value_info, nbytes) {}",
        offset_of!(ValueInfo, nbytes)
    );
}

fn main() -> ExitCode {
    let arg = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "../../native/tests/data/add_mul.pte".to_string());
    if arg == "--layout" {
        print_layout();
        return ExitCode::SUCCESS;
    }
    match run(&arg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
