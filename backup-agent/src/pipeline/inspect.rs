//! A reader that shows every byte it passes to a closure: hashing, or reading a tar's headers,
//! on the way from one stream to another.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

pub struct Inspect<R, F> {
    inner: R,
    seen: F,
}

impl<R, F: FnMut(&[u8])> Inspect<R, F> {
    pub fn new(inner: R, seen: F) -> Self {
        Self { inner, seen }
    }
}

impl<R: AsyncRead + Unpin, F: FnMut(&[u8]) + Unpin> AsyncRead for Inspect<R, F> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &polled {
            (self.seen)(&buf.filled()[before..]);
        }
        polled
    }
}
