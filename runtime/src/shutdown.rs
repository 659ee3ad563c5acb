//! The one shutdown signal of a program.

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// A token cancelled on the first SIGINT (Ctrl-C) or SIGTERM. Call it inside the Tokio runtime;
/// until it is called, the signals keep their default action (the process ends at once).
pub fn on_signal() -> CancellationToken {
    let shutdown = CancellationToken::new();
    tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            // Without a SIGTERM handler Ctrl-C still stops the program.
            let mut term = signal(SignalKind::terminate()).ok();
            let term = async {
                match term.as_mut() {
                    Some(t) => t.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term => {}
            }
            shutdown.cancel();
        }
    });
    shutdown
}
