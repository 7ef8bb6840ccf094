//! Shared by the broker's in-process tests: a real `Server` on a loopback port with its own
//! data directory (real files, fdatasync on), and a blocking wire client that speaks the
//! Kafka protocol to it over a real socket. Nothing is mocked: only the process boundary is
//! missing, which is what makes these tests start in milliseconds.
// Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use sluice_broker::clock::Clock;
use sluice_broker::{BrokerConfig, Server};
use sluice_record::{Attributes, BatchFields, BatchHeaderMut, ProducerEpoch, ProducerId};

/// A broker running in this process on its own runtime; stopped when dropped.
pub struct InProcessBroker {
    pub addr: SocketAddr,
    /// The admin listener (`/metrics`, `/ready`), when `metrics_listen` was set.
    pub admin: Option<SocketAddr>,
    /// The coordinators' clock: the system clock, or the manual one a test advances.
    pub clock: Clock,
    runtime: tokio::runtime::Runtime,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<Result<(), sluice_broker::server::StartError>>>,
    _dir: tempfile::TempDir,
}

impl InProcessBroker {
    /// A broker with the default settings.
    pub fn start() -> Self {
        Self::start_with(|_| {})
    }

    /// A broker with the default settings changed by `configure`.
    pub fn start_with(configure: impl FnOnce(&mut BrokerConfig)) -> Self {
        Self::start_with_clock(Clock::system(), configure)
    }

    /// A broker whose group and transaction timers run on a manual clock that only
    /// [`Self::advance_ms`] moves, with the default settings changed by `configure`.
    pub fn start_manual(configure: impl FnOnce(&mut BrokerConfig)) -> Self {
        Self::start_with_clock(Clock::manual(1_700_000_000_000), configure)
    }

    /// Moves the manual clock forward by `ms`.
    pub fn advance_ms(&self, ms: u64) {
        self.clock.advance_ms(ms);
    }

    fn start_with_clock(clock: Clock, configure: impl FnOnce(&mut BrokerConfig)) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("in-process-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .expect("temp dir");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let mut config = BrokerConfig {
            listen: "127.0.0.1:0".into(),
            data_dir: dir.path().join("data"),
            ..BrokerConfig::default()
        };
        configure(&mut config);
        let server = runtime
            .block_on(Server::bind_with_clock(config, clock.clone()))
            .expect("broker starts");
        let addr = server.local_addr().expect("bound");
        let admin = server.admin_addr();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = runtime.spawn(server.run(async {
            let _ = stopped.await;
        }));
        Self {
            addr,
            admin,
            clock,
            runtime,
            stop: Some(stop),
            served: Some(served),
            _dir: dir,
        }
    }

    pub fn client(&self) -> Client {
        Client::connect(self.addr)
    }
}

impl Drop for InProcessBroker {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(served) = self.served.take() {
            let _ = self.runtime.block_on(served);
        }
    }
}

/// A blocking wire client: one request, then its response.
pub struct Client {
    pub stream: TcpStream,
    correlation_id: i32,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("read timeout");
        Self {
            stream,
            correlation_id: 0,
        }
    }

    /// Sends `req` as `key` at `version` and decodes the response.
    pub fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        req: &Req,
    ) -> Resp {
        let frame = self.frame(key, version, req);
        self.stream.write_all(&frame).expect("send");
        let mut body = self.read_frame().expect("a response");
        let rh = ResponseHeader::decode(&mut body, key.response_header_version(version))
            .expect("response header");
        assert_eq!(rh.correlation_id, self.correlation_id);
        Resp::decode(&mut body, version).expect("response body decodes")
    }

    /// The request frame (size prefix, header, body) with the next correlation id.
    pub fn frame<Req: Encodable>(&mut self, key: ApiKey, version: i16, req: &Req) -> Bytes {
        let mut body = BytesMut::new();
        req.encode(&mut body, version).expect("encode request");
        self.frame_body(key, version, &body)
    }

    /// The request frame around an encoded body, with the next correlation id.
    pub fn frame_body(&mut self, key: ApiKey, version: i16, body: &[u8]) -> Bytes {
        self.correlation_id += 1;
        let mut header = RequestHeader::default();
        header.request_api_key = key as i16;
        header.request_api_version = version;
        header.correlation_id = self.correlation_id;
        header.client_id = Some(StrBytes::from_static_str("in-process-test"));
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        header
            .encode(&mut buf, key.request_header_version(version))
            .expect("encode header");
        buf.extend_from_slice(body);
        let size = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&size.to_be_bytes());
        buf.freeze()
    }

    /// The correlation id of the last request framed.
    pub fn correlation_id(&self) -> i32 {
        self.correlation_id
    }

    /// The next response frame's body (header included), or None when the broker closed
    /// the connection.
    pub fn read_frame(&mut self) -> Option<Bytes> {
        let mut size = [0u8; 4];
        if self.stream.read_exact(&mut size).is_err() {
            return None;
        }
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut body).ok()?;
        Some(Bytes::from(body))
    }
}

/// Polls `probe` until it returns `Some` (every 5 ms, at most 5 s of real time): for the
/// effects of a timer, which fire on the broker's timer task after the clock moved.
pub fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never happened: {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// An ApiVersions request as a client sends it: from v3 Kafka (and Sluice) refuse one
/// without a legal client software name and version.
pub fn api_versions_request() -> kafka_protocol::messages::ApiVersionsRequest {
    let mut r = kafka_protocol::messages::ApiVersionsRequest::default();
    r.client_software_name = StrBytes::from_static_str("sluice-test");
    r.client_software_version = StrBytes::from_static_str("1.0");
    r
}

pub fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

pub fn put_varint(out: &mut Vec<u8>, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    loop {
        let byte = (zigzag & 0x7f) as u8;
        zigzag >>= 7;
        if zigzag == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Who wrote a batch: an idempotent producer, or none (`producer_id` -1).
#[derive(Debug, Clone, Copy)]
pub struct Writer {
    pub producer_id: i64,
    pub epoch: i16,
    pub base_sequence: i32,
}

pub const NO_PRODUCER: Writer = Writer {
    producer_id: -1,
    epoch: -1,
    base_sequence: -1,
};

/// An uncompressed v2 record batch of `values` (null keys, no headers) with a correct
/// CRC-32C, base offset 0 (the broker stamps it).
pub fn batch(writer: Writer, values: &[&[u8]]) -> Bytes {
    let now = 1_700_000_000_000i64;
    let mut records = Vec::new();
    for (i, value) in values.iter().enumerate() {
        let mut body = vec![0u8]; // attributes
        put_varint(&mut body, 0); // timestamp delta
        put_varint(&mut body, i as i64); // offset delta
        put_varint(&mut body, -1); // null key
        put_varint(&mut body, value.len() as i64);
        body.extend_from_slice(value);
        put_varint(&mut body, 0); // no headers
        put_varint(&mut records, body.len() as i64);
        records.extend_from_slice(&body);
    }
    let count = values.len() as i32;
    let fields = BatchFields {
        last_offset_delta: count - 1,
        base_timestamp: now,
        max_timestamp: now,
        producer_id: ProducerId(writer.producer_id),
        producer_epoch: ProducerEpoch(writer.epoch),
        base_sequence: writer.base_sequence,
        records_count: count,
        ..BatchFields::default()
    };
    Bytes::from(fields.to_batch(&records))
}

/// `batch` with its attributes replaced and its CRC recomputed.
pub fn with_attributes(batch: &Bytes, attributes: Attributes) -> Bytes {
    let mut b = batch.to_vec();
    let mut header = BatchHeaderMut::new(&mut b).expect("a batch");
    header.set_attributes(attributes);
    header.update_crc();
    Bytes::from(b)
}

pub mod requests;
pub mod seeds;
