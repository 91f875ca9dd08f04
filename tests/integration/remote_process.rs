#![cfg(feature = "remote")]
//! Remote with the server in another process, as a deployment runs it: this test binary starts
//! itself again as a server (the ignored test [`serve_as_a_process`], told what to register by
//! `BURN_ROUTE_SERVE_AS`), reads the address it prints and runs ops against it. Every op's
//! values and gradients against Flex, the ops of two manifests on one server, an async op, and
//! the errors of a server that registered nothing and of one built from another manifest, with
//! their exact text. The server process is killed when its test ends.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::{Child, ChildStdin, Command, Stdio};

use burn_route::rt::{RemoteProblem, RouteError};
use burn_tensor::remote::RemoteHost;
use burn_tensor::server::{RemoteServer, WebSocketTransport};
use burn_tensor::{Device, Tensor};

use crate::common::values;
use crate::loopback::Register;
use crate::parity;

/// The variable that makes [`serve_as_a_process`] a server, naming what it registers.
const SERVE_AS: &str = "BURN_ROUTE_SERVE_AS";

/// What a server process registers, by the name its tests give it.
fn registration(name: &str) -> Register {
    match name {
        "burn-route" => burn_route::dispatch::serve_remote_ops,
        "both" => crate::remote_forms::both,
        "nothing" => |server, _| server,
        "other-version" => crate::remote::serve_another_version,
        other => panic!("no registration named `{other}`"),
    }
}

/// Not a test of its own: the body of the server processes the tests below start. Without
/// [`SERVE_AS`] it returns at once. With it, it serves one Flex device on `127.0.0.1` (a port
/// the OS picks, printed as `ws://ADDRESS` on a line of its own) until its standard input
/// closes, which happens when the test that started it drops its [`ServerProcess`] (or dies).
#[test]
#[ignore = "the server process of the tests in this module, which start it themselves"]
fn serve_as_a_process() {
    let Ok(name) = std::env::var(SERVE_AS) else {
        return;
    };
    let register = registration(&name);
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let address = listener.local_addr().expect("bound address");
    println!("ws://{address}");
    std::io::stdout().flush().expect("print the address");
    // The parent closes stdin when it is done (or gone): the server ends with it.
    std::thread::spawn(|| {
        let mut line = String::new();
        while std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {
            line.clear();
        }
        std::process::exit(0);
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let devices = [Device::flex()];
    let server = register(RemoteServer::new(devices.clone()), &devices);
    runtime
        .block_on(server.serve_async(WebSocketTransport::from_listener(listener)))
        .expect("the server runs");
}

/// A server process: this binary running [`serve_as_a_process`]. Dropping it closes the
/// server's stdin, which ends it, and waits for it.
struct ServerProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    address: String,
}

impl ServerProcess {
    /// A server process that registers `registration`'s ops.
    fn start(registration: &str) -> Self {
        let mut child = Command::new(std::env::current_exe().expect("this test binary"))
            .args([
                "remote_process::serve_as_a_process",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(SERVE_AS, registration)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the server process");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("its stdout");
        // The test harness prints first (`test NAME ... ` with no line break, which the address
        // then ends): the address is what follows `ws://` to the end of its line. The rest is
        // drained, so the server never writes to a closed pipe.
        let mut lines = BufReader::new(stdout).lines();
        let address = lines
            .by_ref()
            .map(|line| line.expect("read the server's output"))
            .find_map(|line| line.find("ws://").map(|at| line[at..].trim().to_owned()))
            .expect("the server prints its address");
        std::thread::spawn(move || lines.for_each(drop));
        Self {
            child,
            stdin,
            address,
        }
    }

    /// A new client device on the server (a session of its own).
    fn device(&self) -> Device {
        Device::remote_options(&RemoteHost::websocket(&self.address))
            .init()
            .expect("connect to the server process")
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        drop(self.stdin.take());
        if self.child.try_wait().ok().flatten().is_none() {
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn every_op_gives_the_flex_values_and_gradients_on_a_server_process() {
    let server = ServerProcess::start("burn-route");
    parity::every_op_gives_the_flex_values(&server.device());
    #[cfg(feature = "autodiff")]
    parity::gradients_match_flex(&server.device().autodiff());
}

#[test]
fn a_server_process_serves_two_manifests_and_async_ops() {
    let server = ServerProcess::start("both");
    let device = server.device();
    let far = crate::remote_forms::routed::tensor::filled(3, 1.5, &device);
    assert_eq!(values(&far), [1.5, 1.5, 1.5]);
    let x = Tensor::<2>::from_data([[1.0, -2.0], [0.5, 3.0]], &device);
    assert_eq!(
        values(&burn_route::add_relu(x.clone(), x.clone())),
        [2.0, 0.0, 1.0, 6.0]
    );
    // An async op (its composition, on the client's side of the session).
    let holes = Tensor::<1>::from_data([1.0, f32::NAN, f32::INFINITY, 2.0], &device);
    assert_eq!(
        burn_route::check::block_on(burn_route::count_nonfinite(&holes)),
        2
    );
}

#[test]
fn a_server_process_that_registered_nothing_refuses_each_op_by_name() {
    let server = ServerProcess::start("nothing");
    let device = server.device();
    let x = Tensor::<1>::from_data([1.0, -2.0], &device);
    let err = burn_route::try_add_relu(x.clone(), x).unwrap_err();
    let RouteError::RemoteNotServed {
        problem: RemoteProblem::NotServed(cause),
        id,
        ..
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(
        err.to_string(),
        format!(
            "the Remote server does not serve the ops of crate `burn-route`: op `add_relu` runs on \
             the server as one operation (`{id}`), and the server did not answer the crate's \
             handshake ({cause}). Burn's server closes a session at an operation it has no \
             handler for, and at one that fails: either the server does not register the crate's \
             ops, or an earlier operation of this session failed on the server (its log names \
             it). Fix: in the server binary, register the crate's ops with \
             `burn_route::dispatch::serve_remote_ops(server, &devices)` before serving, with the \
             same version of crate `burn-route`; after a failed operation, fix its cause; then \
             reconnect. See \
             https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#remote-not-served"
        )
    );
    // The server process is still up for new sessions.
    let z = Tensor::<1>::from_data([1.0, -2.0], &server.device());
    assert_eq!(values(&burn_route::scale(z, 3.0)), [3.0, -6.0]);
}

#[test]
fn a_server_process_of_another_manifest_refuses_its_differing_and_missing_ops() {
    let server = ServerProcess::start("other-version");
    let device = server.device();
    let x = Tensor::<1>::from_data([1.0, -2.0], &device);
    let err = burn_route::try_add_relu(x.clone(), x.clone()).unwrap_err();
    let RouteError::RemoteNotServed { id, problem, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(problem, &RemoteProblem::OtherVersion);
    assert_eq!(err.to_string(), super::remote::other_version_text(id));
    let err = burn_route::try_bias_gelu(x.clone(), x).unwrap_err();
    let RouteError::RemoteNotServed { id, problem, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(problem, &RemoteProblem::Missing);
    assert_eq!(err.to_string(), super::remote::missing_text(id));
}
