//! The thin pump each end of an agent link runs once its hello is done (DESIGN.md "Sites
//! apart" habits 1 and 7): it owns the WebSocket and tokio and no decision. Frames in become
//! [`Session::handle`] calls, the session's transmits become frames, the session's
//! [`Session::poll_timeout`] is the one timer; when the session says the connection is over,
//! the loop ends with its reason, for the single cleanup after it. The heartbeat (pings,
//! silence) is the sessions' ([`crate::session`]). What other tasks give the session comes
//! in by a channel ([`run`], the agent's) or is put in a shared session by its sender, who
//! then wakes the pump ([`run_notified`], the server's: the driver's calls).

use crate::proto::Framed;
pub use crate::session::Transmit;
use futures_util::{SinkExt, StreamExt};
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::Notify;
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

/// Run one connection's session until the connection is over (DESIGN.md "Sites apart"
/// habit 7: what the other tasks send, the frames received and the session's timer raced
/// with `select!`, one way out). After every input the session's frames go out, then
/// `on_events` takes its events (and may send more, which go out before the next wait).
/// Returns why it ended.
pub async fn run<W, X>(
    ws: WebSocketStream<W>,
    session: &mut X,
    outgoing: &mut UnboundedReceiver<X::Out>,
    on_events: impl FnMut(&mut X),
) -> String
where
    W: AsyncRead + AsyncWrite + Unpin,
    X: Session,
{
    pump(ws, session, Wake::Outgoing(outgoing), on_events).await
}

/// [`run`] for a session that others put work into themselves (the server's: the driver
/// puts its calls beside the session under a lock) and then wake the pump with `notify`:
/// a wake-up is [`Session::handle_timeout`] at the time of the wake, in which the session
/// takes that work.
pub async fn run_notified<W, X>(
    ws: WebSocketStream<W>,
    session: &mut X,
    notify: &Notify,
    on_events: impl FnMut(&mut X),
) -> String
where
    W: AsyncRead + AsyncWrite + Unpin,
    X: Session,
{
    pump(ws, session, Wake::Notified(notify), on_events).await
}

/// What wakes a pump besides its frames and its timer.
enum Wake<'a, T> {
    /// Messages to send, from other tasks.
    Outgoing(&'a mut UnboundedReceiver<T>),
    /// Work put into a shared session.
    Notified(&'a Notify),
}

impl<T> Wake<'_, T> {
    /// The next wake-up: messages (all those waiting), `Some(empty)` for a notification,
    /// `None` once the senders are gone.
    async fn next(&mut self) -> Option<Vec<T>> {
        match self {
            Wake::Outgoing(rx) => {
                let first = rx.recv().await?;
                let mut all = vec![first];
                while let Ok(m) = rx.try_recv() {
                    all.push(m);
                }
                Some(all)
            }
            Wake::Notified(n) => {
                n.notified().await;
                Some(Vec::new())
            }
        }
    }
}

async fn pump<W, X>(
    ws: WebSocketStream<W>,
    session: &mut X,
    mut woken_by: Wake<'_, X::Out>,
    mut on_events: impl FnMut(&mut X),
) -> String
where
    W: AsyncRead + AsyncWrite + Unpin,
    X: Session,
{
    let (mut sink, mut frames) = ws.split();
    loop {
        // Out, then events, until both are quiet (an event may send).
        loop {
            let mut sent = false;
            while let Some(t) = session.poll_transmit() {
                sent = true;
                let frame = match t {
                    Transmit::Message(m) => frame(m),
                    Transmit::Ping => Message::Ping(Vec::new().into()),
                };
                // Everything waiting goes in one write (one flush for a burst).
                if let Err(e) = sink.feed(frame).await {
                    session.closed(Instant::now(), format!("send: {e}"));
                }
            }
            if sent {
                if let Err(e) = sink.flush().await {
                    session.closed(Instant::now(), format!("send: {e}"));
                }
            }
            on_events(session);
            if let Some(why) = session.over() {
                let _ = sink.close().await;
                return why;
            }
            if !session.has_transmit() {
                break;
            }
        }
        let due = session
            .poll_timeout()
            .map(tokio::time::Instant::from_std)
            .unwrap_or_else(|| tokio::time::Instant::now() + std::time::Duration::from_secs(3600));
        tokio::select! {
            woken = woken_by.next() => match woken {
                Some(out) if out.is_empty() => session.handle_timeout(Instant::now()),
                Some(out) => {
                    for m in out {
                        session.send(m);
                    }
                }
                None => session.closed(Instant::now(), "closed".into()),
            },
            frame = frames.next() => {
                let now = Instant::now();
                match frame {
                    Some(Ok(Message::Text(t))) => take(session, now, &t, None),
                    Some(Ok(Message::Binary(b))) => match unframe(&b) {
                        Some((head, payload)) => take(session, now, head, Some(payload)),
                        None => {
                            session.heard(now);
                            tracing::warn!("an unreadable binary frame ({} bytes)", b.len())
                        }
                    },
                    Some(Ok(Message::Close(_))) | None => {
                        session.closed(now, "closed by the other end".into())
                    }
                    Some(Ok(_)) => session.heard(now),
                    Some(Err(e)) => session.closed(now, format!("receive: {e}")),
                }
            }
            _ = tokio::time::sleep_until(due) => session.handle_timeout(Instant::now()),
        }
    }
}

/// One message's JSON (and the bytes beside it) into the session.
fn take<X: Session>(session: &mut X, now: Instant, text: &str, payload: Option<Vec<u8>>) {
    match serde_json::from_str::<X::In>(text) {
        Ok(mut m) => {
            if let Some(p) = payload {
                m.put_payload(p);
            }
            session.handle(now, m)
        }
        Err(e) => {
            session.heard(now);
            tracing::warn!("an unreadable message on the agent link: {e}")
        }
    }
}

/// What [`run`] needs of a session: both ends implement it.
pub trait Session {
    type In: serde::de::DeserializeOwned + Framed;
    type Out: serde::Serialize + Framed;
    fn handle(&mut self, now: Instant, msg: Self::In);
    fn heard(&mut self, now: Instant);
    fn send(&mut self, msg: Self::Out);
    fn closed(&mut self, now: Instant, why: String);
    fn poll_transmit(&mut self) -> Option<Transmit<Self::Out>>;
    fn has_transmit(&self) -> bool;
    fn poll_timeout(&self) -> Option<Instant>;
    fn handle_timeout(&mut self, now: Instant);
    /// Why this connection is over, once it is.
    fn over(&self) -> Option<String>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{Answer, FromAgent};
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
