// Package ingest is Eddy's durable ingest log: every message a source
// receives is appended here before the broker is acked, because MQTT cannot
// replay. The log is the replayable source of every pipeline: its offset is
// the source position stored in checkpoints, a restore replays from it, and
// live processing reads from it too.
//
// # Model and life cycle
//
//	l, err := ingest.Open(dir, ingest.Options{Ack: ingest.AfterFsync})
//	d := ingest.NewDedup(ingest.DedupOptions{MaxInflight: 1000})
//	d.Load(l)                           // index the log again, and its tail
//
// The source side batches everything that arrived while the previous
// Append ran (group commit), never blocking the MQTT client's handler:
//
//	for each received message m:
//	    e := ingest.Entry{Arrival: nowMs, Flags: dupFlag(m), Topic: .., Payload: ..}
//	    if d.Observe(&e, origin(m)).Dropped() { continue } // a redelivery: drop, but ack
//	    batch = append(batch, e)
//	first, last, err := l.Append(batch)  // one write, one fsync
//	d.Appended(first, last)              // or d.Discard() if it failed for good
//	ack the batch's messages, dropped ones too, in order, only after err == nil
//
// On ErrFull nothing was written: keep the batch and its messages unacked
// (the broker's in-flight window then stops the flow) and retry after the
// checkpoint coordinator's Truncate has freed space (Freed says when).
// Full reports that state until an Append fits again. Split batches
// larger than MaxBatchBytes: only a batch within it is sure to fit once
// Truncate has deleted every sealed segment. Dropping the batch instead
// (without Discard) would leave Dedup believing it was logged.
//
// Dedup (see its documentation for the exact rules) drops a message marked
// DUP that equals an entry of the log's newest DefaultIndexMax, and, on a
// connection where the broker resumed the session, a re-send without DUP
// of an entry logged from the previous connection's last MaxInflight
// messages. Its index of 64-bit hashes (IndexBytesPerMillion) is rebuilt
// from the log by Load, not stored: a hash file would write 8 bytes per
// reading to the SD card, where the compressed log writes a few.
//
// The pipeline side reads from the log, both to replay after a restore and
// live, so there is one path for both. Its position is an offset:
//
//	r, err := l.Reader(checkpointPosition + 1) // or 0: from the start
//	for {
//	    e, err := r.Next()
//	    if err == io.EOF { err = l.Wait(ctx, lastRead); continue }
//	    ... process e (Topic/Payload valid until the next Next) ...
//	    lastRead = e.Offset
//	}
//
// A checkpoint records the offset of the last entry its snapshot includes.
// When the oldest retained checkpoint moves on, call
// Truncate(itsPosition+1); whole segments below it are deleted. While the
// log is Full, truncate below the newest checkpoint's position instead:
// with the intake held, nothing new arrives, so the retained positions
// would never move on. The log can always shrink to its active segment,
// since MaxDiskBytes is at least two segments. Restoring
// a savepoint older than FirstOffset gets ErrTruncated from Reader: restore
// the state and resume from FirstOffset (the live stream), saying so.
//
// # Durability
//
// AfterFsync: Append returns after write and fsync; acknowledged messages
// survive power loss. Readers see an entry only once it is fsynced.
//
// AfterWrite: Append returns after write(2); acknowledged messages survive
// a process crash (the kernel keeps the page cache) but power loss may lose
// the last SyncInterval of them. A background goroutine fsyncs at least
// every SyncInterval (negative: the caller calls Sync). Because readers see
// entries before they are fsynced, call Sync before a checkpoint that counts
// them is made durable; otherwise a power loss could leave a checkpoint
// whose position is beyond the log's end (Reader then says ErrOutOfRange),
// and new messages would reuse offsets it claims were processed.
//
// Rolling to a new segment fsyncs the old one first, so only the last
// segment can have a torn tail. Any I/O failure is sticky: the Log refuses
// further writes and must be reopened, which cuts a partial frame.
//
// # MQTT flow control
//
// Acking after the append bounds one connection to the broker's in-flight
// window ÷ commit latency (20 in flight ÷ 10 ms SD-card fsync = 2000
// msgs/s), so mosquitto needs max_inflight_messages ≈ 1000,
// max_queued_messages large and persistence true. QoS 0 messages are
// at most once by nature: they are logged, but one lost before the append
// is gone.
//
// # File format
//
// A log is a directory of segment files named by the offset of their first
// entry, 20 decimal digits: 00000000000000000001.log,
// 00000000000000052311.log, ... plus a LOCK file. Offsets are dense: they
// start at 1 and each segment starts where the previous ended. A segment
// is a header followed by frames; fixed-size integers are little-endian:
//
//	header (12 bytes):  magic "EDDYILOG" | version uint32 (4)
//
//	frame (one per Append, or per chunk of up to 256 KiB of records):
//	+------------+-----------+------------------------------------------------+
//	| length u32 | CRC-32C   | body (length bytes)                             |
//	|            | u32       | first offset u64 | count u32 | codec u8 |       |
//	|            |           | records (codec 0), their zstd frame (1) or      |
//	|            |           | their S2 block (2)                              |
//	+------------+-----------+------------------------------------------------+
//
//	record: flags u8 | arrival delta, zig-zag varint |
//	        [topic length uvarint | topic] |
//	        [properties length uvarint | properties] |
//	        payload length uvarint | payload
//
// A frame holds count ≥ 1 consecutive entries, the first at the offset it
// names, which must be the one expected at its position. The CRC
// (Castagnoli) covers the length field and the body, so a damaged length is
// detected too. A record's arrival is the difference to the previous
// record's (the first: to 0); flags bit 0 is the MQTT DUP flag, bit 1
// RETAIN, bit 2 "too large" (the payload was cut), bit 3 "first message
// of a resumed session", bit 6 "has properties" (the message's MQTT 5
// content type and user properties as its PUBLISH encoded them, at least
// one byte; absent otherwise), bit 7 "same topic as the previous record"
// (the topic is then not stored), others are zero. The records must be exactly count. With
// Options.Compression a frame's records are compressed when that makes
// them smaller: per-reading overhead is a few bytes, and JSON readings of
// one batch compress several-fold. Codec 1 is a zstd frame, codec 2 the S2
// block format (a uvarint of the records' length, then S2 elements; not
// the framed stream format). The codec is per frame, so one segment may
// hold several (the setting changed between runs), and every codec is
// read whatever the log writes. A frame never spans segments and a
// segment never exceeds Options.SegmentBytes.
//
// Every log writes format version 4 and reads versions 3 and 4: version 3
// is version 4 without properties (bit 6), so its segments read as they
// did. A log whose last segment is of version 3 and holds entries starts a
// new segment at its first append (one left empty is given today's
// header), so no segment mixes versions. A segment of any other version
// is a *CorruptionError naming the file, the version found and the ones
// read. A change to the layout raises the version.
//
// On Open the last segment is scanned and a torn tail — trailing bytes that
// do not form a valid frame and are followed by no valid frame — is cut
// (Recovery reports it). Any other damage, in any segment, is a
// *CorruptionError naming the file and byte position, never skipped.
package ingest
