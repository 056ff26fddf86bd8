//! The mechanics of raw DLPack managed-tensor pointers, for interop with other native addons
//! and frontends through the C ABI: exporting a tensor (`exportPointer`, other addons'
//! arguments) and taking ownership of a pointer (`importPointer`).
//!
//! Exports are remembered until their deleter runs, so importing our own export (in any
//! environment) gives back the very tensor that was exported, JS buffer included, instead of a
//! wrapper around it.

use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};

use dlbridge::ffi::{DLManagedTensor, DLManagedTensorVersioned};
use dlbridge::{export, AsTensorView, Flags, ManagedTensor, Tensor as CoreTensor, TensorView};

use crate::arguments::Options;
use crate::live_tensor::LiveTensor;
use crate::resource_counts::{ADDON_EXPORTS, PENDING_EXPORTS};
use dlbridge_napi::node_api::Scope;
use dlbridge_napi::{Error, Result};
use napi::bindgen_prelude::JsValue;

/// An export of ours that no consumer has deleted yet.
struct LiveExport {
    tensor: Weak<LiveTensor>,
    legacy: bool,
}

/// Our live exports, by managed-tensor address.
static LIVE_EXPORTS: LazyLock<Mutex<HashMap<usize, LiveExport>>> = LazyLock::new(Default::default);

fn live_exports() -> std::sync::MutexGuard<'static, HashMap<usize, LiveExport>> {
    LIVE_EXPORTS.lock().unwrap_or_else(|e| e.into_inner())
}

/// What an exported managed tensor keeps alive; dropping it (the consumer's deleter call)
/// forgets the export.
struct ExportedTensor {
    tensor: Arc<LiveTensor>,
    /// The managed tensor's address, known once exported.
    address: Arc<AtomicUsize>,
}

impl ExportedTensor {
    fn new(tensor: Arc<LiveTensor>) -> (ExportedTensor, Arc<AtomicUsize>) {
        PENDING_EXPORTS.increment();
        let address = Arc::new(AtomicUsize::new(0));
        (
            ExportedTensor {
                tensor,
                address: address.clone(),
            },
            address,
        )
    }
}

impl AsTensorView for ExportedTensor {
    fn view(&self) -> TensorView<'_> {
        self.tensor.view()
    }
}

impl Drop for ExportedTensor {
    fn drop(&mut self) {
        let address = self.address.load(Ordering::Acquire);
        if address != 0 {
            live_exports().remove(&address);
        }
        PENDING_EXPORTS.decrement();
    }
}

/// The options of `exportPointer`, read (their getters run) before the tensor is looked at.
#[derive(Clone, Copy)]
pub(crate) struct ExportOptions {
    legacy: bool,
    ignore_read_only: bool,
}

impl ExportOptions {
    /// Reads the options argument `{legacy?, unsafeIgnoreReadOnly?}` of `function`.
    pub(crate) fn read<'env, V: JsValue<'env>>(
        scope: Scope<'env>,
        value: Option<&V>,
        function: &'static str,
    ) -> Result<Self> {
        let options =
            Options::argument(scope, value, function, &["legacy", "unsafeIgnoreReadOnly"])?;
        Ok(ExportOptions {
            legacy: options.bool(c"legacy")?.unwrap_or(false),
            ignore_read_only: options.bool(c"unsafeIgnoreReadOnly")?.unwrap_or(false),
        })
    }
}

/// `tensor.exportPointer({legacy?, unsafeIgnoreReadOnly?})`: the address of a new
/// `DLManagedTensorVersioned` (or legacy `DLManagedTensor`) that keeps the tensor alive,
/// remembered as ours until its deleter runs.
pub(crate) fn export(
    scope: Scope<'_>,
    tensor: &Arc<LiveTensor>,
    options: &ExportOptions,
) -> Result<u64> {
    let (address, legacy, address_slot) = export_unremembered(scope, tensor, options)?;
    address_slot.store(address, Ordering::Release);
    live_exports().insert(
        address,
        LiveExport {
            tensor: Arc::downgrade(tensor),
            legacy,
        },
    );
    Ok(address as u64)
}

/// The export of [`export`], not remembered (importing it takes the path of any foreign
/// producer's tensor): its address, whether it is legacy, and the slot its address goes into
/// once remembered.
pub(crate) fn export_unremembered(
    scope: Scope<'_>,
    tensor: &Arc<LiveTensor>,
    options: &ExportOptions,
) -> Result<(usize, bool, Arc<AtomicUsize>)> {
    let ExportOptions {
        legacy,
        ignore_read_only,
    } = *options;
    if let Some(memory) = tensor.js_memory() {
        memory.check_alive(scope)?;
    }
    let (exported, address_slot) = ExportedTensor::new(tensor.clone());
    let address = if legacy {
        export::to_legacy(exported, ignore_read_only)
            .map_err(|_| {
                Error::plain(
                    "ERR_DLBRIDGE_READ_ONLY",
                    "the tensor is read-only and a legacy DLManagedTensor cannot say so: export a \
                     versioned tensor, or pass {unsafeIgnoreReadOnly: true} if the consumer will \
                     not write",
                )
            })?
            .as_ptr() as usize
    } else {
        export::to_versioned(exported, Flags::empty()).as_ptr() as usize
    };
    Ok((address, legacy, address_slot))
}

/// A versioned export of `tensor` for another addon (the tensor-object protocol's `export`, for
/// an argument kept beyond its call): anonymous, as importing it is the other addon's business.
pub(crate) fn export_for_addon(tensor: &Arc<LiveTensor>) -> NonNull<DLManagedTensorVersioned> {
    ADDON_EXPORTS.increment();
    let (exported, _) = ExportedTensor::new(tensor.clone());
    export::to_versioned(exported, Flags::empty())
}

/// Takes ownership of the managed tensor at `address` (versioned unless `legacy`), for the
/// environment of `scope`.
///
/// # Safety
/// `address` is 0 or a managed tensor of that kind whose ownership passes to us.
pub(crate) unsafe fn take(
    scope: Scope<'_>,
    address: usize,
    legacy: bool,
    flags: Flags,
) -> Result<Arc<LiveTensor>> {
    let own = live_exports()
        .get(&address)
        .map(|e| (e.tensor.upgrade(), e.legacy));
    if let Some((tensor, exported_legacy)) = own {
        if exported_legacy != legacy {
            let (was, asked) = if exported_legacy {
                ("legacy DLManagedTensor", "versioned")
            } else {
                ("DLManagedTensorVersioned", "legacy")
            };
            return Err(Error::type_error(
                "ERR_DLBRIDGE_POINTER_KIND",
                format!("{address:#x} was exported as a {was}, not imported as {asked}"),
            ));
        }
        if let Some(copied) = tensor.as_ref().and_then(|t| t.copy_for_environment(scope)) {
            // Over a worker's typed array, which this environment must not view in place: the
            // copy replaces the export, which is consumed (its deleter drops it).
            // SAFETY: a live export of ours, now owned by us (caller's contract).
            drop(unsafe { import_managed(address, legacy, flags) }?);
            return Ok(LiveTensor::native(copied?.with_flags(flags)));
        }
        if let Some(tensor) = tensor.filter(|t| (t.view().flags() & flags) == flags) {
            // Our own export: consume it (its deleter drops the export) and hand back the tensor.
            // SAFETY: a live export of ours, now owned by us (caller's contract).
            drop(unsafe { import_managed(address, legacy, flags) }?);
            return Ok(tensor);
        }
    }
    // SAFETY: the caller's contract.
    let managed = unsafe { import_managed(address, legacy, flags) }?;
    // A versioned tensor carries its own flags: `readonly: true` can only add READ_ONLY.
    Ok(LiveTensor::native(
        CoreTensor::from_managed(managed).with_flags(flags),
    ))
}

/// Validates and owns a foreign managed tensor (its deleter runs once, when dropped).
///
/// # Safety
/// As for [`take`].
pub(crate) unsafe fn import_managed(
    address: usize,
    legacy: bool,
    flags: Flags,
) -> Result<ManagedTensor> {
    // SAFETY: the caller's contract.
    let imported = unsafe {
        if legacy {
            ManagedTensor::from_legacy(address as *mut DLManagedTensor, flags)
        } else {
            ManagedTensor::from_versioned(address as *mut DLManagedTensorVersioned)
        }
    };
    Ok(imported?)
}
