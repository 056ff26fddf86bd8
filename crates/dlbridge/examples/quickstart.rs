//! A starting point for Rust: make a tensor, hand it out as a DLPack managed tensor (what a
//! consumer in C, Python, Julia, Node or Mojo receives), take it back, and copy it into
//! column-major order. Run it with `cargo run -p dlbridge --example quickstart`
//! (docs/rust.md).

use dlbridge::{export, DataType, Flags, ManagedTensor, Order, Tensor};

fn main() -> dlbridge::Result<()> {
    let t = Tensor::from_vec((0..6).map(|i| i as f32).collect(), &[2, 3])?;
    let address = t.data_ptr();
    println!("made      {:?} {:?} {}", t.shape(), t.strides(), t.dtype());

    // A DLManagedTensorVersioned* for any DLPack consumer; the consumer calls its deleter once.
    let exported = export::to_versioned(t, Flags::empty());
    // SAFETY: `exported` is a live managed tensor made just above and imported exactly once.
    let imported = unsafe { ManagedTensor::from_versioned(exported.as_ptr()) }?;
    let back = Tensor::from(imported);
    println!("imported  same memory: {}", back.data_ptr() == address);

    let columns = back.view().to_contiguous(Order::F)?;
    println!(
        "F copy    {:?} {:?} copied={}",
        columns.shape(),
        columns.strides(),
        columns.view().is_copied()
    );
    assert_eq!(back.dtype(), DataType::F32);
    println!("values    {:?}", back.view().to_vec::<f32>()?);
    Ok(())
}
