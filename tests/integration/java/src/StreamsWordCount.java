// A Kafka Streams application for Sluice's integration suite (test_txn_streams.py): a
// stateful word count under processing.guarantee=exactly_once_v2. Every input record's value
// is a word; the topology re-keys by word (a repartition topic), counts in a state store
// backed by a compacted changelog topic, and writes every new count to the output topic
// (key: word, value: count as a long). Caching is off, so each input record yields exactly
// one output record, and under read_committed the counts of a word must read 1, 2, 3, ...
// with no gap and no repeat, whatever crashed meanwhile.
//
//   StreamsWordCount --bootstrap B --app-id A --input I --output O --state-dir D
//                    [--conf k=v]...
//
// Runs until stdin says "stop" or closes. Prints JSON lines on stdout: {"event":"state",
// "state":S} on every state change, then {"ok":true,"restarts":N} when closed (N: stream
// threads replaced after an error). A stream thread that dies (the broker went away for
// longer than a client timeout) is replaced, as a long-running application would configure.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

public final class StreamsWordCount {
    private StreamsWordCount() {}

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        String input = null;
        String output = null;
        for (int i = 0; i + 1 < args.length; i += 2) {
            String v = args[i + 1];
            switch (args[i]) {
                case "--bootstrap" -> props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, v);
                case "--app-id" -> props.put(StreamsConfig.APPLICATION_ID_CONFIG, v);
                case "--input" -> input = v;
                case "--output" -> output = v;
                case "--state-dir" -> props.put(StreamsConfig.STATE_DIR_CONFIG, v);
                case "--conf" -> {
                    int eq = v.indexOf('=');
                    props.put(v.substring(0, eq), v.substring(eq + 1));
                }
                default -> throw new IllegalArgumentException("unknown flag " + args[i]);
            }
        }
        if (input == null || output == null) {
            throw new IllegalArgumentException("--input and --output are required");
        }
        props.putIfAbsent(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.putIfAbsent(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
        props.putIfAbsent(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        props.putIfAbsent(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");

        StreamsBuilder builder = new StreamsBuilder();
        Materialized<String, Long, KeyValueStore<Bytes, byte[]>> store =
                Materialized.<String, Long>as(Stores.inMemoryKeyValueStore("counts"))
                        .withKeySerde(Serdes.String())
                        .withValueSerde(Serdes.Long())
                        .withCachingDisabled();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .map((k, word) -> KeyValue.pair(word, word))
                .groupByKey(Grouped.with("by-word", Serdes.String(), Serdes.String()))
                .count(store)
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        AtomicInteger restarts = new AtomicInteger();
        try (KafkaStreams streams = new KafkaStreams(builder.build(), props)) {
            streams.setStateListener((now, before) -> emit("{\"event\":\"state\",\"state\":\"" + now + "\"}"));
            streams.setUncaughtExceptionHandler(e -> {
                restarts.incrementAndGet();
                System.err.println("stream thread died, replacing it: " + e);
                return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
            });
            streams.start();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                if (line.trim().equals("stop")) {
                    break;
                }
            }
            streams.close(Duration.ofSeconds(30));
        }
        emit("{\"ok\":true,\"restarts\":" + restarts.get() + "}");
    }

    private static synchronized void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
