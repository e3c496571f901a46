// Start the component's linear memory at 2 MiB (the part of an instance
// slot the host keeps resident between calls), so a typical call never
// grows it: each growth is an mprotect, and the next instance's shrink
// back another, each flushing the other core's TLB.
fn main() {
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        println!("cargo:rustc-link-arg=--initial-memory=2097152");
    }
}
