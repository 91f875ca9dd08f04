//! A burn-remote server for one Flex device on `127.0.0.1`, for `tests/integration/remote.rs` and
//! `benches/backends.rs`. WebSocket only: Burn's Iroh transport reaches public relays, which
//! tests and CI must never do.

use std::net::TcpListener;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use burn_tensor::Device;
use burn_tensor::remote::RemoteHost;
use burn_tensor::server::{RemoteServer, WebSocketTransport};
use tokio::sync::oneshot;

/// How long a stopped server may take to close its sessions and its port.
const SHUTDOWN_LIMIT: Duration = Duration::from_secs(10);

/// A burn-remote server serving one Flex device on `127.0.0.1`, on a port the OS picks, with the
/// ops a [`Register`] function registers. Dropping it stops the server and waits (at most [`SHUTDOWN_LIMIT`]) for its thread to end.
pub struct LoopbackServer {
    port: u16,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<Result<(), String>>>,
}

/// What a server registers before serving: `burn_route::dispatch::serve_remote_ops`, or another
/// registration (none, or a manifest's of another version) for the tests of its errors.
pub type Register = fn(RemoteServer, &[Device]) -> RemoteServer;

impl LoopbackServer {
    /// A server of burn-route's ops (`serve_remote_ops`).
    pub fn start() -> Self {
        Self::serving(burn_route::dispatch::serve_remote_ops)
    }

    /// A server that registers what `register` does.
    pub fn serving(register: Register) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = listener.local_addr().expect("bound address").port();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("remote-flex-server-{port}"))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|err| format!("tokio runtime: {err}"))?;
                runtime.block_on(async move {
                    let devices = [Device::flex()];
                    let serve = register(RemoteServer::new(devices.clone()), &devices)
                        .serve_async(WebSocketTransport::from_listener(listener));
                    // Dropping `serve` when told to stop ends the server and its sessions.
                    tokio::select! {
                        served = serve => served.map_err(|err| format!("server failed: {err}")),
                        _ = stopped => Ok(()),
                    }
                })
            })
            .expect("spawn the server thread");
        Self {
            port,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// A client device on this server (device 0, the Flex device it serves).
    pub fn device(&self) -> Device {
        let host = RemoteHost::websocket(&format!("ws://127.0.0.1:{}", self.port));
        Device::remote_options(&host)
            .init()
            .expect("connect to the loopback server")
    }
}

impl Drop for LoopbackServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            // An error only means the server already ended; the join below reports why.
            let _ = stop.send(());
        }
        let Some(thread) = self.thread.take() else {
            return;
        };
        let deadline = Instant::now() + SHUTDOWN_LIMIT;
        while !thread.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if std::thread::panicking() {
            return; // The test already failed; do not turn it into an abort.
        }
        assert!(
            thread.is_finished(),
            "the loopback server on port {} did not stop within {SHUTDOWN_LIMIT:?}",
            self.port
        );
        let served = thread.join().expect("the server thread panicked");
        assert_eq!(served, Ok(()), "the loopback server on port {}", self.port);
        TcpListener::bind(("127.0.0.1", self.port)).unwrap_or_else(|err| {
            panic!(
                "port {} is still taken after the server stopped: {err}",
                self.port
            )
        });
    }
}
