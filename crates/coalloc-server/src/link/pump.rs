//! The one loop each end of an agent link runs once its hello is done (DESIGN.md "Sites
//! apart" §7): the messages to send, the frames received and the heartbeat raced with
//! `select!`, and one reason why it ended, for the single cleanup after it. Silence for three
//! heartbeat periods ends the link; the server's end also pings at every period (any frame
//! counts as heard, the agent's automatic pongs included).

use super::proto::Framed;
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

/// One message as a frame: text, or, when it carries file bytes, a binary frame of the
/// JSON's length (4 bytes, big-endian), the JSON (bytes taken out) and the bytes.
pub fn frame<T: serde::Serialize + Framed>(mut m: T) -> Message {
    let Some(payload) = m.take_payload() else {
        return text(&m);
    };
    let head = serde_json::to_vec(&m).expect("messages serialize");
    let mut b = Vec::with_capacity(4 + head.len() + payload.len());
    b.extend_from_slice(&(head.len() as u32).to_be_bytes());
    b.extend_from_slice(&head);
    b.extend_from_slice(&payload);
    Message::Binary(b.into())
}

/// A binary frame's JSON and bytes (`None`: not one of [`frame`]'s).
pub fn unframe(b: &[u8]) -> Option<(&str, Vec<u8>)> {
    let n = u32::from_be_bytes(b.get(..4)?.try_into().ok()?) as usize;
    let head = std::str::from_utf8(b.get(4..4 + n)?).ok()?;
    Some((head, b[4 + n..].to_vec()))
}

/// Run the link until it ends; `on_frame` gets every message's JSON, with the file bytes
/// that came beside it in a binary frame. Returns why it ended.
pub async fn run<S, T>(
    ws: WebSocketStream<S>,
    outgoing: &mut UnboundedReceiver<T>,
    heartbeat: Duration,
    ping: bool,
    mut on_frame: impl FnMut(&str, Option<Vec<u8>>),
) -> String
where
    S: AsyncRead + AsyncWrite + Unpin,
    T: serde::Serialize + Framed,
{
    let (mut sink, mut frames) = ws.split();
    let mut beat = tokio::time::interval(heartbeat);
    let mut heard = Instant::now();
    loop {
        tokio::select! {
            out = outgoing.recv() => {
                let Some(mut m) = out else { return "closed".into() };
                // What else is waiting goes in the same write (one flush for a burst).
                loop {
                    if let Err(e) = sink.feed(frame(m)).await {
                        return format!("send: {e}");
                    }
                    match outgoing.try_recv() {
                        Ok(next) => m = next,
                        Err(_) => break,
                    }
                }
                if let Err(e) = sink.flush().await {
                    return format!("send: {e}");
                }
            }
            frame = frames.next() => match frame {
                Some(Ok(Message::Text(t))) => {
                    heard = Instant::now();
                    on_frame(&t, None);
                }
                Some(Ok(Message::Binary(b))) => {
                    heard = Instant::now();
                    match unframe(&b) {
                        Some((head, payload)) => on_frame(head, Some(payload)),
                        None => tracing::warn!("an unreadable binary frame ({} bytes)", b.len()),
                    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::proto::{Answer, FromAgent};
    use coalloc_backends::files::FileAnswer;

    #[test]
    fn file_bytes_travel_raw_in_a_binary_frame_and_other_messages_as_text() {
        let data: Vec<u8> = (0..=255).collect();
        let m = FromAgent::Answer {
            id: 7,
            result: Ok(Answer::File(FileAnswer::Data(data.clone()))),
        };
        let Message::Binary(b) = frame(m.clone()) else {
            panic!("not binary")
        };
        let (head, payload) = unframe(&b).unwrap();
        assert_eq!(payload, data);
        assert!(b.len() < 4 + head.len() + data.len() + 1, "no base64 copy");
        let mut back: FromAgent = serde_json::from_str(head).unwrap();
        back.put_payload(payload);
        assert_eq!(back, m);
        assert!(matches!(
            frame(FromAgent::Answer {
                id: 1,
                result: Ok(Answer::Done)
            }),
            Message::Text(_)
        ));
        assert_eq!(unframe(&[0, 0, 0, 9, b'{']), None);
    }
}
