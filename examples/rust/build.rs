//! Finds libpyexec: $PYEXEC_LIB_DIR, else `pkg-config pyexec` (after
//! `make -C native install PREFIX=...`, with PKG_CONFIG_PATH pointing at
//! PREFIX/lib/pkgconfig), else the development build in ../../native/build.
//! The directory is also written as the binary's rpath, so `cargo run` works
//! without LD_LIBRARY_PATH.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn pkg_config_libdir() -> Option<String> {
    let out = Command::new("pkg-config")
        .args(["--variable=libdir", "pyexec"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let dir = String::from_utf8(out.stdout).ok()?.trim().to_string();
    if dir.is_empty() {
        None
    } else {
        Some(dir)
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=PYEXEC_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let dir = env::var("PYEXEC_LIB_DIR")
        .ok()
        .filter(|d| !d.is_empty())
        .or_else(pkg_config_libdir)
        .unwrap_or_else(|| {
            let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
            manifest
                .join("../../native/build")
                .to_string_lossy()
                .into_owned()
        });
    println!("cargo:rustc-link-search=native={dir}");
    println!("cargo:rustc-link-lib=dylib=pyexec");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
}
