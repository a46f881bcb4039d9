//! What the endpoint counts. Every MAD given to [`receive`](crate::Endpoint::receive) lands
//! in exactly one outcome counter, so `rx_mads` is their sum ([`Counters::rx_outcomes`]).

/// CM messages by attribute, REQ (0x0010) to SIDR REP (0x0018).
pub const CM_ATTRS: usize = 9;

/// The endpoint's counters (cumulative).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
    /// MADs given to `receive`.
    pub rx_mads: u64,
    /// Taken by the state machine (a state changed, an event or an answer came of it).
    pub rx_handled: u64,
    /// Not a CM message: short, wrong base version, class, class version or attribute, or
    /// a length field past its room.
    pub rx_malformed: u64,
    /// A CM MAD this CM does not serve: another method than Send, LAP, APR,
    /// ClassPortInfo, an MRA of a LAP.
    pub rx_unsupported: u64,
    /// For no connection this endpoint knows (unknown or stale communication IDs).
    pub rx_unmatched: u64,
    /// A repeat of a message already taken (answered again where the spec says so).
    pub rx_duplicates: u64,
    /// For a known connection, but not expected in its state (or naming another QP).
    pub rx_unexpected: u64,
    /// Refused with a REJ or a failing SIDR REP: no listener, a stale connection, an
    /// unsupported transport.
    pub rx_rejected: u64,
    /// Well-formed CM messages received, by attribute (index: attribute - 0x0010).
    pub rx_by_attr: [u64; CM_ATTRS],
    /// MADs handed out by `poll_transmit`'s queue, by attribute (retries included).
    pub tx_by_attr: [u64; CM_ATTRS],
    /// Retransmissions after a response timeout.
    pub tx_retries: u64,
    /// Messages whose retries ran out.
    pub timeouts: u64,
}

impl Counters {
    /// The sum of the outcome counters; equals `rx_mads`.
    ///
    /// ```
    /// let c = rnic_cm::Counters::default();
    /// assert_eq!(c.rx_outcomes(), c.rx_mads);
    /// ```
    pub fn rx_outcomes(&self) -> u64 {
        self.rx_handled
            + self.rx_malformed
            + self.rx_unsupported
            + self.rx_unmatched
            + self.rx_duplicates
            + self.rx_unexpected
            + self.rx_rejected
    }

    /// MADs queued for sending, all attributes.
    pub fn tx_total(&self) -> u64 {
        self.tx_by_attr.iter().sum()
    }
}
