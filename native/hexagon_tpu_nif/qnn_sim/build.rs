// The one C file of the backend: it calls QNN log callbacks with a real va_list.
fn main() {
    println!("cargo:rerun-if-changed=src/ffi/log_shim.c");
    cc::Build::new()
        .file("src/ffi/log_shim.c")
        .warnings(true)
        .compile("qnn_sim_log_shim");
}
