//! Devices: [`Device`] and [`DeviceType`], validated from a raw [`DLDevice`].

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::ffi::{self, DLDevice};

macro_rules! device_types {
    ($($(#[$doc:meta])* $variant:ident = $raw:ident, $name:literal;)*) => {
        /// A DLPack device type (every code DLPack 1.3 defines, up to `kDLTrn = 18`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum DeviceType {
            $($(#[$doc])* $variant,)*
        }

        impl DeviceType {
            /// Every device type, in code order.
            pub const ALL: &'static [DeviceType] = &[$(DeviceType::$variant,)*];

            /// The raw `DLDeviceType` code.
            pub fn raw(self) -> i32 {
                match self { $(DeviceType::$variant => ffi::$raw,)* }
            }

            /// Validates a raw device type code.
            pub fn from_raw(raw: i32) -> Result<Self> {
                match raw {
                    $(ffi::$raw => Ok(DeviceType::$variant),)*
                    other => Err(Error::UnknownDevice(other)),
                }
            }

            /// Lower-case name ("cpu", "cuda", "cuda_host", …).
            pub fn name(self) -> &'static str {
                match self { $(DeviceType::$variant => $name,)* }
            }
        }
    };
}

device_types! {
    /// CPU memory.
    Cpu = kDLCPU, "cpu";
    /// CUDA device memory.
    Cuda = kDLCUDA, "cuda";
    /// Pinned CUDA host memory.
    CudaHost = kDLCUDAHost, "cuda_host";
    /// OpenCL.
    OpenCl = kDLOpenCL, "opencl";
    /// Vulkan.
    Vulkan = kDLVulkan, "vulkan";
    /// Metal.
    Metal = kDLMetal, "metal";
    /// Verilog simulator.
    Vpi = kDLVPI, "vpi";
    /// ROCm device memory.
    Rocm = kDLROCM, "rocm";
    /// Pinned ROCm host memory.
    RocmHost = kDLROCMHost, "rocm_host";
    /// Extension device.
    ExtDev = kDLExtDev, "ext_dev";
    /// CUDA managed memory.
    CudaManaged = kDLCUDAManaged, "cuda_managed";
    /// oneAPI unified shared memory.
    OneApi = kDLOneAPI, "oneapi";
    /// WebGPU.
    WebGpu = kDLWebGPU, "webgpu";
    /// Hexagon DSP.
    Hexagon = kDLHexagon, "hexagon";
    /// Microsoft MAIA.
    Maia = kDLMAIA, "maia";
    /// AWS Trainium.
    Trn = kDLTrn, "trn";
}

impl DeviceType {
    /// Whether the host CPU can read and write this memory directly.
    pub fn is_host_accessible(self) -> bool {
        matches!(
            self,
            DeviceType::Cpu | DeviceType::CudaHost | DeviceType::RocmHost | DeviceType::CudaManaged
        )
    }

    /// Whether this is CUDA memory: the device's own, pinned host memory or managed memory, all
    /// of which CUDA streams order.
    pub fn is_cuda(self) -> bool {
        matches!(
            self,
            DeviceType::Cuda | DeviceType::CudaHost | DeviceType::CudaManaged
        )
    }
}

/// A validated device: type and ordinal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Device {
    /// Device type.
    pub kind: DeviceType,
    /// Device ordinal.
    pub id: i32,
}

impl Device {
    /// The CPU (`kDLCPU`, ordinal 0).
    pub const CPU: Device = Device {
        kind: DeviceType::Cpu,
        id: 0,
    };

    /// Validates a raw `DLDevice`.
    pub fn from_raw(raw: DLDevice) -> Result<Self> {
        Ok(Device {
            kind: DeviceType::from_raw(raw.device_type)?,
            id: raw.device_id,
        })
    }

    /// The raw `DLDevice`.
    pub fn to_raw(self) -> DLDevice {
        DLDevice {
            device_type: self.kind.raw(),
            device_id: self.id,
        }
    }
}

impl fmt::Display for Device {
    /// "cpu", "cuda:1", …: the ordinal is omitted for CPU 0.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.kind, self.id) {
            (DeviceType::Cpu, 0) => f.write_str("cpu"),
            (kind, id) => write!(f, "{}:{}", kind.name(), id),
        }
    }
}

impl FromStr for Device {
    type Err = Error;

    /// Parses "cpu", "cuda", "cuda:1", "rocm_host:0", ….
    fn from_str(s: &str) -> Result<Self> {
        let unknown = || Error::UnknownName {
            what: "device",
            name: s.to_owned(),
        };
        let (name, id) = match s.split_once(':') {
            Some((n, id)) => (n, id.parse::<i32>().map_err(|_| unknown())?),
            None => (s, 0),
        };
        let kind = DeviceType::ALL
            .iter()
            .copied()
            .find(|k| k.name() == name)
            .ok_or_else(unknown)?;
        Ok(Device { kind, id })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_device_type_round_trips() {
        assert_eq!(DeviceType::ALL.len(), 16);
        for &kind in DeviceType::ALL {
            assert_eq!(DeviceType::from_raw(kind.raw()), Ok(kind));
            let dev = Device { kind, id: 3 };
            assert_eq!(dev.to_string().parse::<Device>(), Ok(dev));
        }
        assert_eq!(DeviceType::Trn.raw(), 18);
    }

    #[test]
    fn unknown_codes_and_names_are_named_in_the_error() {
        for raw in [0, 5, 6, 19, -1, i32::MAX] {
            assert_eq!(DeviceType::from_raw(raw), Err(Error::UnknownDevice(raw)));
        }
        assert_eq!(
            "tpu:0".parse::<Device>(),
            Err(Error::UnknownName {
                what: "device",
                name: "tpu:0".into()
            })
        );
        assert_eq!(Device::CPU.to_string(), "cpu");
    }
}
