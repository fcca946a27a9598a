//! Compiles `proto/*.proto` with protox (no system protoc) and generates the
//! tonic service code from the descriptor set.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let raft = proto_dir.join("raft.proto");
    println!("cargo:rerun-if-changed={}", raft.display());
    let descriptors = protox::compile([&raft], [&proto_dir])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // The client is built on a `Channel` we configure; no generated `connect`.
        .build_transport(false)
        .bytes(".")
        .compile_fds(descriptors)?;
    Ok(())
}
