//! The QP context (`qpc`), carried by CREATE_QP, every modify command and QUERY_QP.

use super::Ads;

prm_layout! {
    /// QP context (`mlx5_ifc_qpc_bits`, 0xE8 bytes).
    pub struct Qpc("qpc", 0xE8) {
        /// QP state (see [`super::QpState`]).
        state / set_state: u8 = dw(0x00, 31, 28);
        /// LAG TX port affinity (0 = firmware chooses).
        lag_tx_port_affinity / set_lag_tx_port_affinity: u8 = dw(0x00, 27, 24);
        /// Service type: 0 RC, 1 UC, 2 UD, 8 QP1 (see [`super::QpSt`]).
        st / set_st: u8 = dw(0x00, 23, 16);
        /// Path migration state (3 = migrated).
        pm_state / set_pm_state: u8 = dw(0x00, 12, 11);
        /// End padding mode of scattered receives.
        end_padding_mode / set_end_padding_mode: u8 = dw(0x00, 3, 2);
        /// WQE signatures enabled.
        wq_signature / set_wq_signature: bool = dw(0x04, 31, 31);
        /// Block multicast loopback.
        block_lb_mc / set_block_lb_mc: bool = dw(0x04, 30, 30);
        /// Protection domain.
        pd / set_pd: u32 = dw(0x04, 23, 0);
        /// Path MTU: 1 = 256 .. 5 = 4096.
        mtu / set_mtu: u8 = dw(0x08, 31, 29);
        /// log2 of the largest message.
        log_msg_max / set_log_msg_max: u8 = dw(0x08, 28, 24);
        /// log2 of the number of RQ WQEs.
        log_rq_size / set_log_rq_size: u8 = dw(0x08, 22, 19);
        /// log2 of the RQ WQE size in bytes, minus 4.
        log_rq_stride / set_log_rq_stride: u8 = dw(0x08, 18, 16);
        /// The QP has no send queue.
        no_sq / set_no_sq: bool = dw(0x08, 15, 15);
        /// log2 of the number of 64-byte SQ WQEBBs.
        log_sq_size / set_log_sq_size: u8 = dw(0x08, 14, 11);
        /// Timestamp format.
        ts_format / set_ts_format: u8 = dw(0x08, 7, 6);
        /// Reserved lkey enable.
        rlky / set_rlky: bool = dw(0x08, 4, 4);
        /// Counter set the QP counts into.
        counter_set_id / set_counter_set_id: u8 = dw(0x0C, 31, 24);
        /// UAR page the QP's doorbells use.
        uar_page / set_uar_page: u32 = dw(0x0C, 23, 0);
        /// User index reported in CQEs (0xFFFFFF when cqe_version = 1).
        user_index / set_user_index: u32 = dw(0x10, 23, 0);
        /// log2 of the buffer page size, relative to 4 KiB.
        log_page_size / set_log_page_size: u8 = dw(0x14, 28, 24);
        /// Destination QPN.
        remote_qpn / set_remote_qpn: u32 = dw(0x14, 23, 0);
        /// Primary address path.
        primary_address_path / primary_address_path_mut: Ads = nested(0x18);
        /// Alternate address path (path migration).
        secondary_address_path / secondary_address_path_mut: Ads = nested(0x44);
        /// log2 of the ACK request frequency.
        log_ack_req_freq / set_log_ack_req_freq: u8 = dw(0x70, 31, 28);
        /// log2 of outstanding RDMA READ / atomic requests as requester.
        log_sra_max / set_log_sra_max: u8 = dw(0x70, 23, 21);
        /// Transport retry count.
        retry_count / set_retry_count: u8 = dw(0x70, 18, 16);
        /// RNR retry count (7 = infinite).
        rnr_retry / set_rnr_retry: u8 = dw(0x70, 15, 13);
        /// Fast registration enable.
        fre / set_fre: bool = dw(0x70, 11, 11);
        /// Remaining RNR retries (QUERY_QP).
        cur_rnr_retry / set_cur_rnr_retry: u8 = dw(0x70, 10, 8);
        /// Remaining transport retries (QUERY_QP).
        cur_retry_count / set_cur_retry_count: u8 = dw(0x70, 7, 5);
        /// Next PSN to send.
        next_send_psn / set_next_send_psn: u32 = dw(0x78, 23, 0);
        /// Send CQ.
        cqn_snd / set_cqn_snd: u32 = dw(0x7C, 23, 0);
        /// Source QPN for UD sends on behalf of another QP.
        deth_sqpn / set_deth_sqpn: u32 = dw(0x80, 23, 0);
        /// Last acknowledged PSN.
        last_acked_psn / set_last_acked_psn: u32 = dw(0x88, 23, 0);
        /// Send sequence number.
        ssn / set_ssn: u32 = dw(0x8C, 23, 0);
        /// log2 of outstanding RDMA READ / atomic requests as responder.
        log_rra_max / set_log_rra_max: u8 = dw(0x90, 23, 21);
        /// Atomic mode.
        atomic_mode / set_atomic_mode: u8 = dw(0x90, 19, 16);
        /// Remote read enable.
        rre / set_rre: bool = dw(0x90, 15, 15);
        /// Remote write enable.
        rwe / set_rwe: bool = dw(0x90, 14, 14);
        /// Remote atomic enable.
        rae / set_rae: bool = dw(0x90, 13, 13);
        /// Offset of the buffer in its first page.
        page_offset / set_page_offset: u8 = dw(0x90, 11, 6);
        /// Minimum RNR NAK timer code.
        min_rnr_nak / set_min_rnr_nak: u8 = dw(0x94, 28, 24);
        /// Next expected receive PSN.
        next_rcv_psn / set_next_rcv_psn: u32 = dw(0x94, 23, 0);
        /// XRC domain (XRC QPs).
        xrcd / set_xrcd: u32 = dw(0x98, 23, 0);
        /// Receive CQ.
        cqn_rcv / set_cqn_rcv: u32 = dw(0x9C, 23, 0);
        /// Doorbell record bus address.
        dbr_addr / set_dbr_addr: u64 = qw(0xA0);
        /// Q_Key (UD).
        q_key / set_q_key: u32 = dw(0xA8, 31, 0);
        /// Receive queue type: 0 normal, 1 SRQ, 3 zero-length.
        rq_type / set_rq_type: u8 = dw(0xAC, 26, 24);
        /// SRQ number when `rq_type` is 1.
        srqn_rmpn_xrqn / set_srqn_rmpn_xrqn: u32 = dw(0xAC, 23, 0);
        /// Responder message sequence number.
        rmsn / set_rmsn: u32 = dw(0xB0, 23, 0);
        /// Hardware SQ WQEBB counter.
        hw_sq_wqebb_counter / set_hw_sq_wqebb_counter: u16 = dw(0xB4, 31, 16);
        /// Software SQ WQEBB counter.
        sw_sq_wqebb_counter / set_sw_sq_wqebb_counter: u16 = dw(0xB4, 15, 0);
        /// Hardware RQ counter.
        hw_rq_counter / set_hw_rq_counter: u32 = dw(0xB8, 31, 0);
        /// Software RQ counter.
        sw_rq_counter / set_sw_rq_counter: u32 = dw(0xBC, 31, 0);
        /// The doorbell record is in a registered umem.
        dbr_umem_valid / set_dbr_umem_valid: bool = dw(0xD0, 28, 28);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PrmLayout;
    use zerocopy::IntoBytes;

    #[test]
    fn fields_land_where_the_prm_says() {
        let mut q = Qpc::default();
        q.set_state(3);
        q.set_st(2);
        q.set_mtu(5);
        q.set_log_sq_size(0xF);
        q.set_dbr_addr(0x1122_3344_5566_7788);
        q.primary_address_path_mut().set_udp_sport(0xC000);
        let b = q.as_bytes();
        assert_eq!(b[0], 0x30);
        assert_eq!(b[1], 0x02);
        assert_eq!(b[8] >> 5, 5);
        assert_eq!(u16::from_be_bytes([b[10], b[11]]) >> 11, 0xF);
        assert_eq!(&b[0xA0..0xA8], &0x1122_3344_5566_7788u64.to_be_bytes());
        assert_eq!(&b[0x18 + 0x22..0x18 + 0x24], &[0xC0, 0x00]);
        assert_eq!(q.primary_address_path().udp_sport(), 0xC000);
        assert_eq!(Qpc::SIZE, 0xE8);
    }
}
