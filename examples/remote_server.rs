//! A burn-remote server serving one Flex device over WebSocket, with burn-route's ops registered
//! (`burn_route::dispatch::serve_remote_ops`: each op with output metadata runs here as one
//! operation, with its Flex kernel). The op check compares every op on it against Flex when
//! `BURN_ROUTE_CHECK_REMOTE` names it (the guide's "Your own ops", step 8):
//!
//! ```sh
//! cargo run --example remote_server --features remote -- 3000   # or 0: the OS picks a port
//! BURN_ROUTE_CHECK_REMOTE=ws://127.0.0.1:3000 cargo test --features remote --test op_check
//! ```
//!
//! It listens on `127.0.0.1` unless a second argument names the address to bind, such as
//! `0.0.0.0` for every interface (WebSocket is not encrypted: bind a trusted network's address).
//! It prints the address it serves (`ws://ADDRESS:PORT`) on its first line, then serves until it
//! is stopped.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, TcpListener};

use burn_tensor::Device;
use burn_tensor::server::{RemoteServer, WebSocketTransport};

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let port: u16 = match args.next() {
        Some(arg) => arg
            .parse()
            .map_err(|err| format!("the port `{arg}` is not a number: {err}"))?,
        None => 3000,
    };
    let address: IpAddr = match args.next() {
        Some(arg) => arg
            .parse()
            .map_err(|err| format!("`{arg}` is not an IP address to bind: {err}"))?,
        None => IpAddr::V4(Ipv4Addr::LOCALHOST),
    };
    let listener = TcpListener::bind((address, port))
        .map_err(|err| format!("cannot listen on {address}:{port}: {err}"))?;
    let bound = listener.local_addr().map_err(|err| err.to_string())?;
    println!("ws://{bound}");
    std::io::stdout().flush().map_err(|err| err.to_string())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| format!("tokio runtime: {err}"))?;
    let devices = [Device::flex()];
    let server =
        burn_route::dispatch::serve_remote_ops(RemoteServer::new(devices.clone()), &devices);
    runtime.block_on(async move {
        server
            .serve_async(WebSocketTransport::from_listener(listener))
            .await
            .map_err(|err| format!("server failed: {err}"))
    })
}
