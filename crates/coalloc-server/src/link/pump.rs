//! The one loop each end of an agent link runs once its hello is done (DESIGN.md "Sites
//! apart" §7): the messages to send, the frames received and the heartbeat raced with
//! `select!`, and one reason why it ended, for the single cleanup after it. Silence for three
//! heartbeat periods ends the link; the server's end also pings at every period (any frame
//! counts as heard, the agent's automatic pongs included).

use futures_util::{SinkExt, StreamExt};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// One message as a text frame.
pub fn text<T: serde::Serialize>(m: &T) -> Message {
    Message::Text(serde_json::to_string(m).expect("messages serialize").into())
}

/// Run the link until it ends; `on_text` gets every text frame. Returns why it ended.
pub async fn run<S, T>(
    ws: WebSocketStream<S>,
    outgoing: &mut UnboundedReceiver<T>,
    heartbeat: Duration,
    ping: bool,
    mut on_text: impl FnMut(&str),
) -> String
where
    S: AsyncRead + AsyncWrite + Unpin,
    T: serde::Serialize,
{
    let (mut sink, mut frames) = ws.split();
    let mut beat = tokio::time::interval(heartbeat);
    let mut heard = Instant::now();
    loop {
        tokio::select! {
            out = outgoing.recv() => {
                let Some(m) = out else { return "closed".into() };
                // What else is waiting goes in the same write (one flush for a burst).
                let mut batch = vec![m];
                while let Ok(m) = outgoing.try_recv() {
                    batch.push(m);
                }
                for m in &batch {
                    if let Err(e) = sink.feed(text(m)).await {
                        return format!("send: {e}");
                    }
                }
                if let Err(e) = sink.flush().await {
                    return format!("send: {e}");
                }
            }
            frame = frames.next() => match frame {
                Some(Ok(Message::Text(t))) => {
                    heard = Instant::now();
                    on_text(&t);
                }
                Some(Ok(Message::Close(_))) | None => return "closed by the other end".into(),
                Some(Ok(_)) => heard = Instant::now(),
                Some(Err(e)) => return format!("receive: {e}"),
            },
            _ = beat.tick() => {
                if heard.elapsed() > heartbeat * 3 {
                    return format!("nothing heard for {} ms", heard.elapsed().as_millis());
                }
                if ping {
                    if let Err(e) = sink.send(Message::Ping(Vec::new().into())).await {
                        return format!("ping: {e}");
                    }
                }
            }
        }
    }
}
