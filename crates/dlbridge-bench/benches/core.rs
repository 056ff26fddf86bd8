//! Criterion benchmarks of the core: import + validate + drop of a managed tensor, the copy
//! kernel on 64 MiB against `memcpy` (ratios are computed by `scripts/bench_report.py`), and the
//! shared-memory transport's allocations, exports and hand-overs.
#![allow(missing_docs)] // criterion_group!/criterion_main! generate undocumented functions

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use dlbridge::copy::copy_into;
use dlbridge::{export, AsTensorView, DataType, Flags, ManagedTensor, Order, Tensor};

fn import(c: &mut Criterion) {
    let mut g = c.benchmark_group("import");
    for shape in [&[16i64][..], &[8, 16, 32, 4]] {
        let t = Arc::new(Tensor::empty(shape, DataType::F32).unwrap());
        g.bench_function(format!("validate_drop_{}d", shape.len()), |b| {
            b.iter_batched(
                || export::to_versioned(t.clone(), Flags::empty()),
                |p| {
                    // SAFETY: a fresh export handed to the importer once.
                    let m = unsafe { ManagedTensor::from_versioned(p.as_ptr()) }.unwrap();
                    black_box(m.view().data_ptr());
                },
                BatchSize::SmallInput,
            )
        });
        g.bench_function(format!("export_import_drop_{}d", shape.len()), |b| {
            b.iter(|| {
                let p = export::to_versioned(t.clone(), Flags::empty());
                // SAFETY: as above.
                let m = unsafe { ManagedTensor::from_versioned(p.as_ptr()) }.unwrap();
                black_box(Tensor::from(m).data_ptr());
            })
        });
    }
    g.finish();
}

const BYTES: usize = 64 << 20;

fn copy(c: &mut Criterion) {
    let mut g = c.benchmark_group("copy_64MiB");
    g.sample_size(20)
        .throughput(Throughput::Bytes(BYTES as u64));
    let n = (BYTES / 4) as i64; // f32 elements
    let side = 4096i64;
    let src = Tensor::arange(n, DataType::F32).unwrap();
    let dst = Tensor::empty(&[n], DataType::F32).unwrap();
    g.bench_function("memcpy", |b| {
        b.iter(|| {
            // SAFETY: two distinct 64 MiB allocations.
            unsafe { std::ptr::copy_nonoverlapping(src.data_ptr(), dst.data_ptr(), BYTES) };
            black_box(dst.data_ptr());
        })
    });
    // Views of the same 64 MiB source under different layouts, each copied into a compact buffer.
    let whole = Arc::new(src);
    let view_of = |shape: &[i64], strides: &[i64], start: i64| {
        let keep = whole.clone();
        // SAFETY: every layout below stays inside the 64 MiB source, which `keep` holds alive.
        unsafe {
            Tensor::from_raw_parts(
                keep.data_ptr().add(start as usize * 4),
                shape,
                Some(strides),
                DataType::F32,
                dlbridge::Device::CPU,
                Flags::empty(),
                Box::new(keep),
            )
        }
        .unwrap()
    };
    let cases = [
        (
            "contiguous",
            view_of(&[side, side], &[side, 1], 0),
            Order::C,
        ),
        (
            "transpose_2d",
            view_of(&[side, side], &[1, side], 0),
            Order::C,
        ),
        (
            "reversed_rows",
            view_of(&[side, side], &[-side, 1], n - side),
            Order::C,
        ),
        ("reversed_1d", view_of(&[n], &[-1], n - 1), Order::C),
        (
            "every_other_column",
            view_of(&[side, side / 2], &[side, 2], 0),
            Order::C,
        ),
    ];
    for (name, view, order) in &cases {
        let out = Tensor::zeros(view.shape(), DataType::F32, *order).unwrap();
        g.bench_function(*name, |b| {
            b.iter(|| copy_into(&view.view(), &out.view()).unwrap())
        });
    }
    g.finish();
}

/// Shared memory, 4 KiB of data: a segment allocated and dropped; a tensor exported and opened by
/// its creator's handle; the same with a hand-over between them (export, `handoff` to this
/// process's keeper, the consumer's `open` taking it and the keeper letting go). The last two
/// differ by the hand-over alone.
fn shm(c: &mut Criterion) {
    use dlbridge::shm::{self, Access};
    let mut g = c.benchmark_group("shm");
    let src = Tensor::zeros(&[1024], DataType::F32, Order::C).unwrap();
    g.bench_function("empty_4KiB", |b| {
        b.iter(|| black_box(shm::empty(&[1024], DataType::F32).unwrap().handle().len()))
    });
    g.bench_function("export_open_4KiB", |b| {
        b.iter(|| {
            let shared = shm::export(&src.view()).unwrap();
            black_box(
                shm::open(shared.handle(), Access::ReadOnly)
                    .unwrap()
                    .data_ptr(),
            );
        })
    });
    g.bench_function("export_handoff_open_4KiB", |b| {
        b.iter(|| {
            let handle = shm::export(&src.view()).unwrap().handoff().unwrap();
            black_box(shm::open(&handle, Access::ReadOnly).unwrap().data_ptr());
        })
    });
    g.finish();
}

criterion_group!(benches, import, copy, shm);
criterion_main!(benches);
