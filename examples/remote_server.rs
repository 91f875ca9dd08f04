//! A burn-remote server serving one Flex device over WebSocket on `127.0.0.1`, for checking ops
//! on `Remote` from another process: the op check compares every op on it against Flex when
//! `BURN_ROUTE_CHECK_REMOTE` names it (the guide's "Your own ops", step 8).
//!
//! ```sh
//! cargo run --example remote_server --features remote -- 3000   # or 0: the OS picks a port
//! BURN_ROUTE_CHECK_REMOTE=ws://127.0.0.1:3000 cargo test --features remote --test op_check
//! ```
//!
//! It prints the address it serves (`ws://127.0.0.1:PORT`) on its first line, then serves until
//! it is stopped.

use std::io::Write;
use std::net::TcpListener;

use burn_tensor::Device;
use burn_tensor::server::{RemoteServer, WebSocketTransport};

fn main() -> Result<(), String> {
    let port: u16 = match std::env::args().nth(1) {
        Some(arg) => arg
            .parse()
            .map_err(|err| format!("the port `{arg}` is not a number: {err}"))?,
        None => 3000,
    };
    let listener = TcpListener::bind(("127.0.0.1", port))
        .map_err(|err| format!("cannot listen on 127.0.0.1:{port}: {err}"))?;
    let port = listener.local_addr().map_err(|err| err.to_string())?.port();
    println!("ws://127.0.0.1:{port}");
    std::io::stdout().flush().map_err(|err| err.to_string())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| format!("tokio runtime: {err}"))?;
    runtime.block_on(async move {
        RemoteServer::new([Device::flex()])
            .serve_async(WebSocketTransport::from_listener(listener))
            .await
            .map_err(|err| format!("server failed: {err}"))
    })
}
