//! Links a release `saltsight` with the functions `run` executes first and
//! together, when `SALTSIGHT_SYMBOL_ORDER_FILE` names their linker names
//! (`scripts/symbol-order --resolve` makes that file from
//! `packaging/symbol-order.txt` and a first build; `scripts/package` does both
//! and links again). The kernel then maps about 5 of the code's 10.7 MB rather
//! than 9: it maps 64 KiB around each page run (fault-around), and that code
//! was spread over most of the text.
//!
//! Only where the linker takes `--symbol-ordering-file`: rustc's own lld, the
//! default for x86_64-unknown-linux-gnu since Rust 1.90 when no other linker
//! is configured. Elsewhere a warning says why, and the binary is linked as
//! it would be without the file.

use std::path::{Path, PathBuf};
use std::process::Command;

const ORDER: &str = "SALTSIGHT_SYMBOL_ORDER_FILE";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed={ORDER}");
    let Some(file) = std::env::var_os(ORDER).filter(|f| !f.is_empty()) else {
        return;
    };
    let file = PathBuf::from(file);
    println!("cargo:rerun-if-changed={}", file.display());
    match why_not(&file) {
        None => {
            println!(
                "cargo:rustc-link-arg-bin=saltsight=-Wl,--symbol-ordering-file={}",
                file.display()
            );
            // A name the code no longer has is not an error.
            println!("cargo:rustc-link-arg-bin=saltsight=-Wl,--no-warn-symbol-ordering");
        }
        Some(reason) => {
            println!("cargo:warning=saltsight is linked without {ORDER} ({reason})")
        }
    }
}

/// Why `file` cannot be given to this build's linker, if it cannot.
fn why_not(file: &Path) -> Option<String> {
    let env = |name: &str| std::env::var(name).unwrap_or_default();
    if env("PROFILE") != "release" {
        return Some("not a release build".into());
    }
    if !file.is_absolute() || !file.is_file() {
        return Some(format!("{} is not a file's absolute path", file.display()));
    }
    if env("TARGET") != "x86_64-unknown-linux-gnu" || env("HOST") != env("TARGET") {
        return Some(format!("target {}: not rustc's default lld", env("TARGET")));
    }
    if !env("RUSTC_LINKER").is_empty() {
        return Some(format!("linker {} configured", env("RUSTC_LINKER")));
    }
    let flags = env("CARGO_ENCODED_RUSTFLAGS");
    if ["fuse-ld", "linker", "link-self-contained"]
        .iter()
        .any(|f| flags.contains(f))
    {
        return Some("RUSTFLAGS choose the linker".into());
    }
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let run = |args: &[&str]| {
        Command::new(&rustc)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let version = run(&["-vV"]).unwrap_or_default();
    let minor = version
        .lines()
        .find_map(|l| l.strip_prefix("release: 1."))
        .and_then(|rest| rest.split('.').next()?.parse::<u32>().ok());
    if minor.is_none_or(|m| m < 90) {
        return Some("rustc before 1.90 links with the system's cc".into());
    }
    // A rustc built without its own lld (some distributions') uses the system's.
    let sysroot = run(&["--print", "sysroot"]).unwrap_or_default();
    let lld = Path::new(sysroot.trim()).join("lib/rustlib/x86_64-unknown-linux-gnu/bin/gcc-ld");
    if !lld.join("ld.lld").is_file() {
        return Some("this rustc has no lld of its own".into());
    }
    None
}
