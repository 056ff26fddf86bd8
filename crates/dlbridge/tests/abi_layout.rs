//! Checks every size and field offset of the `ffi` mirror against an official `dlpack.h`
//! (from an installed package: `$DLPACK_INCLUDE_DIR`, else the project's cached venv found by
//! `scripts/dlpack-include.sh`), by compiling and running a small C program.

use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;

use dlbridge::ffi::*;

fn dlpack_include_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("DLPACK_INCLUDE_DIR") {
        return dir.into();
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("bash")
        .arg(root.join("scripts/dlpack-include.sh"))
        .output()
        .expect("run scripts/dlpack-include.sh");
    assert!(
        out.status.success(),
        "no official dlpack.h: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// (C expression, Rust value) pairs: every struct size and field offset, and the constants.
fn expectations() -> Vec<(String, usize)> {
    let mut e: Vec<(String, usize)> = Vec::new();
    macro_rules! layout {
        ($ty:ident { $($field:ident),* }) => {
            e.push((format!("sizeof({})", stringify!($ty)), size_of::<$ty>()));
            $(e.push((format!("offsetof({}, {})", stringify!($ty), stringify!($field)), offset_of!($ty, $field)));)*
        };
    }
    layout!(DLPackVersion { major, minor });
    layout!(DLDevice {
        device_type,
        device_id
    });
    layout!(DLDataType { code, bits, lanes });
    layout!(DLTensor {
        data,
        device,
        ndim,
        dtype,
        shape,
        strides,
        byte_offset
    });
    layout!(DLManagedTensor {
        dl_tensor,
        manager_ctx,
        deleter
    });
    layout!(DLManagedTensorVersioned {
        version,
        manager_ctx,
        deleter,
        flags,
        dl_tensor
    });
    layout!(DLPackExchangeAPIHeader { version, prev_api });
    layout!(DLPackExchangeAPI {
        header,
        managed_tensor_allocator,
        managed_tensor_from_py_object_no_sync,
        managed_tensor_to_py_object_no_sync,
        dltensor_from_py_object_no_sync,
        current_work_stream
    });
    e.push(("sizeof(DLDeviceType)".into(), size_of::<DLDeviceType>()));
    macro_rules! constant {
        ($($name:ident),*) => { $(e.push((format!("(size_t)({})", stringify!($name)), $name as usize));)* };
    }
    constant!(DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION);
    constant!(
        DLPACK_FLAG_BITMASK_READ_ONLY,
        DLPACK_FLAG_BITMASK_IS_COPIED,
        DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED
    );
    constant!(
        kDLCPU,
        kDLCUDA,
        kDLCUDAHost,
        kDLOpenCL,
        kDLVulkan,
        kDLMetal,
        kDLVPI,
        kDLROCM,
        kDLROCMHost
    );
    constant!(
        kDLExtDev,
        kDLCUDAManaged,
        kDLOneAPI,
        kDLWebGPU,
        kDLHexagon,
        kDLMAIA,
        kDLTrn
    );
    constant!(
        kDLInt,
        kDLUInt,
        kDLFloat,
        kDLOpaqueHandle,
        kDLBfloat,
        kDLComplex,
        kDLBool
    );
    constant!(
        kDLFloat8_e3m4,
        kDLFloat8_e4m3,
        kDLFloat8_e4m3b11fnuz,
        kDLFloat8_e4m3fn,
        kDLFloat8_e4m3fnuz
    );
    constant!(
        kDLFloat8_e5m2,
        kDLFloat8_e5m2fnuz,
        kDLFloat8_e8m0fnu,
        kDLFloat6_e2m3fn,
        kDLFloat6_e3m2fn
    );
    constant!(kDLFloat4_e2m1fn);
    e
}

#[test]
fn ffi_layout_matches_official_dlpack_h() {
    let include = dlpack_include_dir();
    let header = include.join("dlpack/dlpack.h");
    assert!(header.is_file(), "{} missing", header.display());
    let expected = expectations();
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <dlpack/dlpack.h>\nint main(void) {\n",
    );
    for (expr, _) in &expected {
        c += &format!("  printf(\"%zu\\n\", (size_t)({expr}));\n");
    }
    c += "  return 0;\n}\n";
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("abi_layout");
    std::fs::create_dir_all(&dir).unwrap();
    let (src, exe) = (dir.join("layout.c"), dir.join("layout"));
    std::fs::write(&src, c).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(cc)
        .args(["-std=c11", "-Wall", "-Werror", "-I"])
        .arg(&include)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status()
        .expect("run the C compiler");
    assert!(
        status.success(),
        "compiling against {} failed",
        header.display()
    );
    let out = Command::new(&exe).output().unwrap();
    let values: Vec<usize> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(values.len(), expected.len());
    let mismatches: Vec<String> = expected
        .iter()
        .zip(&values)
        .filter(|((_, rust), c)| rust != *c)
        .map(|((expr, rust), c)| format!("{expr}: C {c}, Rust {rust}"))
        .collect();
    assert!(
        mismatches.is_empty(),
        "layout mismatches:\n{}",
        mismatches.join("\n")
    );
    assert!(expected.len() > 60, "checked {} facts", expected.len());
}
