//! Producer latency decomposition from librdkafka's statistics (`statistics.interval.ms`).
//!
//! Each producer emits statistics once a second; the per-broker windows (reset at every emit)
//! say where ack latency goes: `int_latency` (time in the partition queue, i.e. linger and
//! batching), `outbuf_latency` (request waiting for the socket), `rtt` (request sent until
//! response: wire plus broker), `throttle`. Topic windows give real batch sizes, and the
//! cumulative `tx_bytes` / `txmsg_bytes` counters the compression achieved on the wire.
//!
//! Across clients, averages are exact (sum / count of the windows); the p99 reported is the
//! largest per-client p99 in the interval (an upper bound: percentiles do not merge).

use rdkafka::statistics::{Statistics, Window};
use serde::Serialize;

/// One latency window folded over clients.
#[derive(Debug, Clone, Copy, Default)]
pub struct WinAcc {
    sum: f64,
    cnt: i64,
    p99_max: i64,
}

impl WinAcc {
    fn add(&mut self, w: &Window) {
        if w.cnt > 0 {
            self.sum += w.avg as f64 * w.cnt as f64;
            self.cnt += w.cnt;
            self.p99_max = self.p99_max.max(w.p99);
        }
    }
    fn merge(&mut self, o: &WinAcc) {
        self.sum += o.sum;
        self.cnt += o.cnt;
        self.p99_max = self.p99_max.max(o.p99_max);
    }
    fn avg(&self) -> Option<f64> {
        (self.cnt > 0).then(|| self.sum / self.cnt as f64)
    }
    fn p99(&self) -> Option<f64> {
        (self.cnt > 0).then_some(self.p99_max as f64)
    }
}

/// The statistics of one or more clients over one interval (or the measured window).
#[derive(Debug, Clone, Copy, Default)]
pub struct SplitAcc {
    int_latency: WinAcc,
    outbuf_latency: WinAcc,
    rtt: WinAcc,
    throttle: WinAcc,
    batch_bytes: WinAcc,
    batch_msgs: WinAcc,
    wire_bytes: i64,
    msg_bytes: i64,
    emits: u64,
}

/// Per-client memory of the cumulative counters, to turn them into deltas.
/// (Copy: the measured accumulator replays an emit from the same starting point.)
#[derive(Debug, Clone, Copy, Default)]
pub struct Cumulative {
    tx_bytes: i64,
    txmsg_bytes: i64,
}

impl SplitAcc {
    /// Folds one statistics emit of one producer into this accumulator. Only real brokers
    /// (node id >= 0) and the benchmark topic count.
    pub fn add_emit(&mut self, st: &Statistics, topic: &str, last: &mut Cumulative) {
        self.emits += 1;
        for b in st.brokers.values().filter(|b| b.nodeid >= 0) {
            if let Some(w) = &b.int_latency {
                self.int_latency.add(w);
            }
            if let Some(w) = &b.outbuf_latency {
                self.outbuf_latency.add(w);
            }
            if let Some(w) = &b.rtt {
                self.rtt.add(w);
            }
            if let Some(w) = &b.throttle {
                self.throttle.add(w);
            }
        }
        if let Some(t) = st.topics.get(topic) {
            self.batch_bytes.add(&t.batchsize);
            self.batch_msgs.add(&t.batchcnt);
        }
        self.wire_bytes += (st.tx_bytes - last.tx_bytes).max(0);
        self.msg_bytes += (st.txmsg_bytes - last.txmsg_bytes).max(0);
        last.tx_bytes = st.tx_bytes;
        last.txmsg_bytes = st.txmsg_bytes;
    }

    pub fn merge(&mut self, o: &SplitAcc) {
        self.int_latency.merge(&o.int_latency);
        self.outbuf_latency.merge(&o.outbuf_latency);
        self.rtt.merge(&o.rtt);
        self.throttle.merge(&o.throttle);
        self.batch_bytes.merge(&o.batch_bytes);
        self.batch_msgs.merge(&o.batch_msgs);
        self.wire_bytes += o.wire_bytes;
        self.msg_bytes += o.msg_bytes;
        self.emits += o.emits;
    }

    pub fn is_empty(&self) -> bool {
        self.emits == 0
    }

    pub fn summary(&self) -> Option<LatencySplit> {
        if self.is_empty() {
            return None;
        }
        let ms = |v: Option<f64>| v.map(|us| us / 1000.0);
        Some(LatencySplit {
            queue_avg_ms: ms(self.int_latency.avg()),
            queue_p99_ms: ms(self.int_latency.p99()),
            outbuf_avg_ms: ms(self.outbuf_latency.avg()),
            outbuf_p99_ms: ms(self.outbuf_latency.p99()),
            rtt_avg_ms: ms(self.rtt.avg()),
            rtt_p99_ms: ms(self.rtt.p99()),
            throttle_avg_ms: ms(self.throttle.avg()),
            batch_bytes_avg: self.batch_bytes.avg(),
            batch_msgs_avg: self.batch_msgs.avg(),
            wire_bytes: self.wire_bytes,
            msg_bytes: self.msg_bytes,
            wire_compression_ratio: (self.wire_bytes > 0 && self.msg_bytes > 0)
                .then(|| self.msg_bytes as f64 / self.wire_bytes as f64),
        })
    }
}

/// Where producer time goes, from librdkafka statistics. Averages are exact over all clients;
/// `_p99_ms` is the largest per-client p99.
#[derive(Debug, Clone, Serialize)]
pub struct LatencySplit {
    /// Partition queue (linger, batching): librdkafka `int_latency`.
    pub queue_avg_ms: Option<f64>,
    pub queue_p99_ms: Option<f64>,
    /// Request waiting to be written to the socket: `outbuf_latency`.
    pub outbuf_avg_ms: Option<f64>,
    pub outbuf_p99_ms: Option<f64>,
    /// Request on the wire and in the broker: `rtt`.
    pub rtt_avg_ms: Option<f64>,
    pub rtt_p99_ms: Option<f64>,
    pub throttle_avg_ms: Option<f64>,
    /// Produced batches: average bytes and messages.
    pub batch_bytes_avg: Option<f64>,
    pub batch_msgs_avg: Option<f64>,
    /// Bytes sent to brokers, and message bytes they carried.
    pub wire_bytes: i64,
    pub msg_bytes: i64,
    /// msg_bytes / wire_bytes (above 1: the codec paid off, net of protocol overhead).
    pub wire_compression_ratio: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_real_brokers_and_deltas() {
        // A minimal statistics document as librdkafka emits it (only the fields we read
        // matter; serde fills the rest from the JSON below).
        let json = |tx: i64, txmsg: i64| {
            format!(
                r#"{{"name":"p","client_id":"c","type":"producer","ts":1,"time":1,"age":1,"replyq":0,"msg_cnt":0,"msg_size":0,"msg_max":0,"msg_size_max":0,"simple_cnt":0,"metadata_cache_cnt":1,
                "tx":1,"tx_bytes":{tx},"rx":1,"rx_bytes":1,"txmsgs":1,"txmsg_bytes":{txmsg},"rxmsgs":0,"rxmsg_bytes":0,
                "brokers":{{
                  "b1":{{"name":"b1","nodeid":1,"nodename":"x","source":"learned","state":"UP","stateage":1,"outbuf_cnt":0,"outbuf_msg_cnt":0,"waitresp_cnt":0,"waitresp_msg_cnt":0,"tx":1,"txbytes":1,"txerrs":0,"txretries":0,"txidle":0,"req_timeouts":0,"rx":1,"rxbytes":1,"rxerrs":0,"rxcorriderrs":0,"rxpartial":0,"rxidle":0,"zbuf_grow":0,"buf_grow":0,"req":{{}},"toppars":{{}},
                     "int_latency":{{"min":1,"max":9000,"avg":4000,"sum":8000,"cnt":2,"stddev":0,"hdrsize":0,"p50":3000,"p75":0,"p90":0,"p95":0,"p99":9000,"p99_99":0,"outofrange":0}},
                     "rtt":{{"min":1,"max":900,"avg":500,"sum":1000,"cnt":2,"stddev":0,"hdrsize":0,"p50":400,"p75":0,"p90":0,"p95":0,"p99":900,"p99_99":0,"outofrange":0}}}},
                  "bootstrap":{{"name":"bootstrap","nodeid":-1,"nodename":"y","source":"configured","state":"UP","stateage":1,"outbuf_cnt":0,"outbuf_msg_cnt":0,"waitresp_cnt":0,"waitresp_msg_cnt":0,"tx":1,"txbytes":1,"txerrs":0,"txretries":0,"txidle":0,"req_timeouts":0,"rx":1,"rxbytes":1,"rxerrs":0,"rxcorriderrs":0,"rxpartial":0,"rxidle":0,"zbuf_grow":0,"buf_grow":0,"req":{{}},"toppars":{{}},
                     "rtt":{{"min":1,"max":1,"avg":99999,"sum":1,"cnt":5,"stddev":0,"hdrsize":0,"p50":1,"p75":0,"p90":0,"p95":0,"p99":99999,"p99_99":0,"outofrange":0}}}}
                }},
                "topics":{{}}}}"#
            )
        };
        let a: Result<Statistics, _> = serde_json::from_str(&json(1000, 3000));
        let b: Result<Statistics, _> = serde_json::from_str(&json(1500, 4000));
        let (Ok(a), Ok(b)) = (a, b) else {
            // If librdkafka's statistics shape ever changes, this test must be revisited.
            panic!("statistics JSON did not parse");
        };
        let mut acc = SplitAcc::default();
        let mut last = Cumulative::default();
        acc.add_emit(&a, "t", &mut last);
        acc.add_emit(&b, "t", &mut last);
        let s = acc.summary().unwrap_or_else(|| panic!("empty"));
        assert_eq!(s.queue_avg_ms, Some(4.0));
        assert_eq!(s.queue_p99_ms, Some(9.0));
        // The bootstrap pseudo-broker (node -1) is ignored.
        assert_eq!(s.rtt_avg_ms, Some(0.5));
        assert_eq!(s.rtt_p99_ms, Some(0.9));
        assert_eq!((s.wire_bytes, s.msg_bytes), (1500, 4000));
        assert!(SplitAcc::default().summary().is_none());
    }
}
