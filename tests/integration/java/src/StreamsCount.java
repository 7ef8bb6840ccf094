// A Kafka Streams application with a state store, for test_streams_restore.py: it counts the
// records of each key of an input topic in a RocksDB key-value store ("counts"), whose
// changelog topic (<application.id>-counts-changelog) Streams creates compacted. Record caching
// is off, so every update is written to the changelog; the changelog's topic configs come from
// the "topic."-prefixed --conf settings.
//
//   StreamsCount --bootstrap B --application-id A --input T --state-dir D --expect-total N
//                [--timeout-ms T] [--conf k=v]...
//
// Runs until the store's counts add up to N (read through an interactive query), then closes
// cleanly (committing its offsets) and prints one JSON line on stdout:
//   {"ok": true, "counts": {key: count}, "restored": R, "restore_ms": M}
// where R is the number of changelog records restored into the store before processing began
// (0 when the local state directory already had the store). Exit 2 with "ok": false on timeout.

import java.time.Duration;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyKeyValueStore;

public final class StreamsCount {
    private static final String STORE = "counts";

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = new TreeMap<>();
        Properties props = new Properties();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            if (argv[i].equals("--conf")) {
                String[] kv = argv[i + 1].split("=", 2);
                props.put(kv[0], kv[1]);
            } else {
                a.put(argv[i].substring(2), argv[i + 1]);
            }
        }
        long expect = Long.parseLong(a.get("expect-total"));
        long timeoutMs = Long.parseLong(a.getOrDefault("timeout-ms", "60000"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("bootstrap"));
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, a.get("application-id"));
        props.put(StreamsConfig.STATE_DIR_CONFIG, a.get("state-dir"));
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "100");
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
        props.putIfAbsent("consumer.auto.offset.reset", "earliest");

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(a.get("input"), Consumed.with(Serdes.String(), Serdes.String()))
                .groupByKey()
                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as(STORE)
                        .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()));

        AtomicLong restored = new AtomicLong();
        AtomicLong restoreMs = new AtomicLong();
        long started = System.nanoTime();
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            @Override
            public void onRestoreStart(TopicPartition tp, String store, long start, long end) {
            }

            @Override
            public void onBatchRestored(TopicPartition tp, String store, long batchEnd, long n) {
                restored.addAndGet(n);
            }

            @Override
            public void onRestoreEnd(TopicPartition tp, String store, long total) {
                restoreMs.set((System.nanoTime() - started) / 1_000_000);
            }
        });
        streams.start();
        long deadline = System.currentTimeMillis() + timeoutMs;
        Map<String, Long> counts = new TreeMap<>();
        long total = -1;
        String error = null;
        while (true) {
            if (streams.state() == KafkaStreams.State.RUNNING) {
                try {
                    ReadOnlyKeyValueStore<String, Long> store = streams.store(
                            StoreQueryParameters.fromNameAndType(STORE, QueryableStoreTypes.keyValueStore()));
                    counts.clear();
                    total = 0;
                    try (KeyValueIterator<String, Long> it = store.all()) {
                        while (it.hasNext()) {
                            KeyValue<String, Long> kv = it.next();
                            counts.put(kv.key, kv.value);
                            total += kv.value;
                        }
                    }
                    if (total >= expect) {
                        break;
                    }
                } catch (RuntimeException e) {
                    // The store is not queryable yet (a rebalance or a restore in progress).
                }
            } else if (streams.state() == KafkaStreams.State.ERROR) {
                error = "streams in state ERROR";
                break;
            }
            if (System.currentTimeMillis() > deadline) {
                error = "timeout: state " + streams.state() + ", total " + total;
                break;
            }
            Thread.sleep(50);
        }
        // Let the last updates' offsets be committed before closing (close commits too).
        streams.close(Duration.ofSeconds(30));

        StringBuilder sb = new StringBuilder();
        sb.append("{\"ok\": ").append(error == null);
        if (error != null) {
            sb.append(", \"error\": \"").append(error.replace("\"", "'")).append('"');
        }
        sb.append(", \"restored\": ").append(restored.get());
        sb.append(", \"restore_ms\": ").append(restoreMs.get());
        sb.append(", \"counts\": {");
        String sep = "";
        for (Map.Entry<String, Long> e : counts.entrySet()) {
            sb.append(sep).append('"').append(e.getKey()).append("\": ").append(e.getValue());
            sep = ", ";
        }
        sb.append("}}");
        System.out.println(sb);
        System.exit(error == null ? 0 : 2);
    }
}
