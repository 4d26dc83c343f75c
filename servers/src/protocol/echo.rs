//! Echo: every byte read is written back unchanged.

use crate::conn::Conn;

/// Queues `data` to be written back; with `server_closes`, closes once it has been sent.
pub fn consume(conn: &mut Conn, data: &[u8], server_closes: bool) {
    conn.output.extend_from_slice(data);
    if server_closes {
        conn.close_after_flush = true;
    }
}
