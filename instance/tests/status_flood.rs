//! The status port under a flood (issue 47, defect 2). The kubelet's probes reach the manager
//! on port 8000 with a one-second timeout; a readiness probe that fails takes the primary out
//! of `-rw`, and after a minute the operator fails over. Anyone who can reach the port could
//! hold its connection slots with sockets that never speak TLS, and the probes queued behind
//! them: no token needed for a failover at will. The probes must keep answering in time.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::*;

/// Sockets the flood keeps open at once (the attack held 300 from the node).
const SILENT: usize = 300;
/// The kubelet's probe timeout.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Keeps `SILENT` sockets open to `addr`, one in ten sending garbage instead of a ClientHello,
/// opening a new one for each the server closes, until `stop`.
fn flood(addr: SocketAddr, stop: Arc<AtomicBool>, held: Arc<AtomicUsize>) {
    let mut open: Vec<TcpStream> = Vec::new();
    let mut opened = 0usize;
    while !stop.load(Ordering::Relaxed) {
        // Closed by the server: end of stream, or an error other than "nothing yet".
        open.retain(|s| match s.peek(&mut [0u8; 1]) {
            Ok(0) => false,
            Ok(_) => true,
            Err(e) => e.kind() == ErrorKind::WouldBlock,
        });
        while open.len() < SILENT && !stop.load(Ordering::Relaxed) {
            let mut socket = match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                Ok(socket) => socket,
                // The port's queue is full: what today's limit did to the probes too.
                Err(_) => break,
            };
            opened += 1;
            if opened.is_multiple_of(10) {
                let _ = socket.write_all(b"GET / HTTP/1.1\r\n\r\n");
            }
            let _ = socket.set_nonblocking(true);
            open.push(socket);
        }
        held.store(open.len(), Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(50));
    }
    // Drain what the server sent, so that nothing is left unread on close.
    for mut socket in open {
        let _ = socket.read(&mut [0u8; 64]);
    }
}

/// One probe as the kubelet makes it: HTTPS, no token, its timeout.
fn probe(port: u16) -> (Duration, u16) {
    let started = Instant::now();
    let out = std::process::Command::new("curl")
        .args(["-sk", "-o", "/dev/null", "-w", "%{http_code}", "--max-time"])
        .arg(format!("{}", PROBE_TIMEOUT.as_secs_f64()))
        .arg(format!("https://127.0.0.1:{port}/readyz"))
        .output()
        .expect("curl runs");
    let code = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    (started.elapsed(), code)
}

#[test]
fn the_probes_answer_in_time_while_hundreds_of_silent_sockets_are_held() {
    let cluster = single_primary();
    let port = cluster.members[0].status_port;
    assert_eq!(probe(port).1, 200, "ready before the flood");

    let stop = Arc::new(AtomicBool::new(false));
    let held = Arc::new(AtomicUsize::new(0));
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("address");
    let flooding = {
        let (stop, held) = (stop.clone(), held.clone());
        std::thread::spawn(move || flood(addr, stop, held))
    };
    // Half of them already fill what the server held and its accept queue before the fix.
    wait_for(
        "the flood holds its sockets",
        Duration::from_secs(30),
        || held.load(Ordering::Relaxed) >= SILENT / 2,
    );

    // Twelve seconds of probes: past the handshake timeout, so the server has closed and the
    // flood re-opened sockets at least twice.
    let mut probes = Vec::new();
    let until = Instant::now() + Duration::from_secs(12);
    while Instant::now() < until {
        probes.push(probe(port));
        std::thread::sleep(Duration::from_millis(200));
    }
    let still_held = held.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    flooding.join().expect("flood thread");

    let late: Vec<_> = probes.iter().filter(|(_, code)| *code != 200).collect();
    assert!(
        late.is_empty(),
        "{} of {} probes failed or took over {PROBE_TIMEOUT:?} while {still_held} silent \
         sockets were held: {probes:?}",
        late.len(),
        probes.len()
    );
    assert!(
        still_held >= SILENT / 2,
        "the flood held {still_held} sockets at the end"
    );
    let slowest = probes
        .iter()
        .map(|(took, _)| *took)
        .max()
        .unwrap_or_default();
    eprintln!(
        "{} probes under the flood, the slowest {slowest:?}",
        probes.len()
    );
}
