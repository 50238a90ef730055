import { crc32 } from 'node:zlib'

/**
 * The preallocated tail of a zstd log (see the README's _Preallocated tail_).
 * Invariants, in the order a reader relies on them:
 *
 * 1. A padded log is `[header unit][batch units…][padding]`, where the
 *    padding is ONE zstd skippable frame (magic `0x184D2A5E`, 4-byte LE size)
 *    that reaches exactly the end of the file. Its content is ignored by
 *    every zstd decoder, so `zstd -dc` reads a padded log like any other.
 * 2. The padding's content is zeros, except its last 64 bytes: two 32-byte
 *    end slots. A slot names a committed end (a unit boundary: the end of a
 *    batch), the next seq there, the CRC32 field of that batch's trailer and
 *    a generation; it carries its own CRC32. The valid slot with the highest
 *    generation is the newest: a checkpoint at most `checkpointDistance`
 *    (16 KiB, or a sixteenth of a smaller log) of units before the committed
 *    end (a log whose writer released it in order has it at the committed
 *    end: the same rule with nothing to walk).
 *    A reader finds the committed end from it: it checks the trailer before
 *    the slot's end against the slot, then walks the units after it
 *    (structure, trailer, seq) to the padding frame's header, which must
 *    reach the end of the file (`walkToPadding`); the tail check then
 *    decodes the last batch. Anything else there is not trusted (the caller
 *    scans the log).
 * 3. An append that fits overwrites the padding from its start with
 *    `[batch frame][trailer][new pad header]` in ONE write, then ONE
 *    `fdatasync`: one range, usually one block, flushed. Only when the
 *    committed end would pass the newest slot's by more than
 *    `checkpointDistance` does it also write the next slot (alternating,
 *    generation + 1) before the sync. Neither write changes the file's size
 *    or allocates a block, so on ext4 the sync is a pure data flush (no
 *    journal commit): what SQLite's reused WAL gets. The slot is written in
 *    the same sync as its batch, so the newest durable slot never names an
 *    end past the durable units. A writer releasing its log in order (close,
 *    eviction) writes the next slot at the committed end, every batch before
 *    it already synced (`planSettledSlot`; the write itself is not synced):
 *    a log at rest reads with nothing to walk, and a crash that loses or
 *    tears that write leaves the previous slot, in the other place.
 * 4. An append that does not fit grows the padding: the same bytes, then
 *    zeros and both slots up to a new size written with real writes (so the
 *    blocks are initialized, never "unwritten" extents), then one sync — the
 *    rare append that commits the file system's journal. Growth is
 *    geometric (about 1/16 of the log, at most 1 MiB, ending on a 4 KiB
 *    boundary), so padding costs at most ~6% of a large log.
 * 5. A log freshly created or forked has no padding (its first append is
 *    published whole); the second append pads it.
 * 6. A torn append (a prefix of its write) overwrote the pad header at the
 *    committed end, so the log does not end with a valid padding frame:
 *    the bytes from the committed end are a torn tail, which `load` and the
 *    next writer truncate (padding included; the next append grows it again).
 *    A batch is committed iff its frame and trailer are complete, as before.
 *    Behind an intact pad header, then, the padding holds exactly zeros and
 *    slots: any other byte there is damage (`SESSION_PERSISTENCE_CORRUPT`),
 *    as a flipped byte anywhere else in a log is. Bytes after the padding
 *    frame (never written by a writer) are a torn tail.
 * 7. Revisions (`revisionOf`): a padded log's size does not change with an
 *    append, so its revision is its committed end and last trailer's CRC
 *    field, found by the walk from the newest slot — what the writer
 *    computes from its own state. A reader can see a log while an append is
 *    in flight (a unit half written where the walk goes); when the walk does
 *    not end at an intact pad header reaching exactly the end of the file
 *    (an append overwrote the header at its committed end with its batch),
 *    the revision is marked unsettled, never one a writer returned, so
 *    followers read the log again.
 */

/** The padding frame's magic (a zstd skippable frame, distinct from the trailers' 0x184D2A5D). */
export const PAD_MAGIC = 0x184d2a5e
/** A skippable frame's header: magic and content size. */
export const PAD_HEADER_BYTES = 8
const SLOT_MAGIC = 0x45485344 // 'DSHE'
/** One end slot. */
export const SLOT_BYTES = 32
/** Both slots, at the very end of the padding. */
export const SLOTS_BYTES = 2 * SLOT_BYTES
/** The smallest padding frame: its header and the slots. */
const MIN_PADDING = PAD_HEADER_BYTES + SLOTS_BYTES
const BLOCK = 4096
/** Growth is at most this much beyond what the append needs. */
export const MAX_PAD_GROWTH = 1024 * 1024
/** Growth adds about this fraction of the log's committed size. */
const GROWTH_DIVISOR = 16
/**
 * The newest slot trails the committed end by at most this many bytes of
 * units (invariant 2): a reader walks at most this far (a few dozen small
 * batches) from it, in one read, and all but about one small append in twenty write one
 * range, not the batch and a slot in another block (about 5% of a durable
 * 1 KiB append, paired with SQLite: `bench append-sqlite`).
 */
export const CHECKPOINT_BYTES = 16 * 1024

/** How far the newest slot may trail a committed end of `end` bytes: `CHECKPOINT_BYTES`, or a sixteenth of a smaller log (so a walk reads little of one). */
export function checkpointDistance(end: number): number {
  return Math.min(CHECKPOINT_BYTES, Math.floor(end / 16))
}

/** Where a log's bytes end: `fileEnd === committedEnd` when it has no padding. The writer keeps it in a `PaddedTail`. */
export interface TailExtent {
  readonly committedEnd: number
  readonly fileEnd: number
  /** The newest slot's generation (0 when there is no padding). */
  readonly generation: number
  /** The end the newest slot names (`committedEnd` when there is no padding). */
  readonly checkpoint: number
}

export interface EndSlot {
  readonly generation: number
  /** The committed end: where the padding frame starts. */
  readonly end: number
  readonly nextSeq: number
  /** The last batch trailer's own CRC32 (its last four bytes). */
  readonly trailerCheck: number
}

export function encodePadHeader(contentBytes: number): Buffer {
  const out = Buffer.allocUnsafe(PAD_HEADER_BYTES)
  out.writeUInt32LE(PAD_MAGIC, 0)
  out.writeUInt32LE(contentBytes, 4)
  return out
}

/** The content size of the padding frame header at `pos` (`undefined`: none there, or too small to hold the slots). */
export function padContentSize(buf: Buffer, pos: number): number | undefined {
  if (pos + PAD_HEADER_BYTES > buf.length || buf.readUInt32LE(pos) !== PAD_MAGIC) return undefined
  const size = buf.readUInt32LE(pos + 4)
  return size >= SLOTS_BYTES ? size : undefined
}

/** Where the padding frame starting at `pos` ends (`undefined`: no padding frame there, or one reaching past `buf`). */
export function paddingFrameEnd(buf: Buffer, pos: number): number | undefined {
  const size = padContentSize(buf, pos)
  if (size === undefined) return undefined
  const end = pos + PAD_HEADER_BYTES + size
  return end <= buf.length ? end : undefined
}

/**
 * Whether a padding frame's content is what a writer leaves (invariant 2):
 * zeros, then two slots each all zeros or valid. A torn append overwrote the
 * frame's header first, so behind an intact header anything else is damage —
 * or a reader racing an append in flight (the caller reads again once).
 */
export function paddingIntact(buf: Buffer, pos: number, end: number): boolean {
  const slots = end - SLOTS_BYTES
  for (let at = pos + PAD_HEADER_BYTES; at < slots; at++) if (buf[at] !== 0) return false
  for (let at = slots; at < end; at += SLOT_BYTES) {
    if (decodeSlot(buf, at) !== undefined) continue
    for (let i = at; i < at + SLOT_BYTES; i++) if (buf[i] !== 0) return false
  }
  return true
}

export function encodeSlot(slot: EndSlot): Buffer {
  const out = Buffer.allocUnsafe(SLOT_BYTES)
  out.writeUInt32LE(SLOT_MAGIC, 0)
  out.writeUInt32LE(slot.generation >>> 0, 4)
  writeU64(out, slot.end, 8)
  writeU64(out, slot.nextSeq, 16)
  out.writeUInt32LE(slot.trailerCheck >>> 0, 24)
  out.writeUInt32LE(crc32(out.subarray(0, 28)), 28)
  return out
}

function decodeSlot(buf: Buffer, at: number): EndSlot | undefined {
  if (buf.readUInt32LE(at) !== SLOT_MAGIC || crc32(buf.subarray(at, at + 28)) !== buf.readUInt32LE(at + 28)) return undefined
  return {
    generation: buf.readUInt32LE(at + 4),
    end: readU64(buf, at + 8),
    nextSeq: readU64(buf, at + 16),
    trailerCheck: buf.readUInt32LE(at + 24),
  }
}

/** The newest valid slot of the last 64 bytes of a file (`undefined`: no valid slot). */
export function newestSlot(lastBytes: Buffer): EndSlot | undefined {
  if (lastBytes.length !== SLOTS_BYTES) return undefined
  const a = decodeSlot(lastBytes, 0)
  const b = decodeSlot(lastBytes, SLOT_BYTES)
  if (a === undefined || b === undefined) return a ?? b
  return b.generation > a.generation ? b : a
}

/** The CRC32 a trailer carries in its last four bytes (what a slot records of the last batch). */
export function trailerCheckOf(trailer: Buffer): number {
  return trailer.readUInt32LE(trailer.length - 4)
}

/** What one durable append writes: `[position, bytes]` pairs (at most two) and the tail after it. */
export interface PaddedWrite {
  readonly writes: ReadonlyArray<readonly [position: number, parts: readonly Buffer[]]>
  readonly grows: boolean
  /** Bytes written in all. */
  readonly bytes: number
  readonly tail: TailExtent
}

/**
 * Plans an append of `body` + `trailer` to a padding-capable log: into the
 * padding when it fits (invariant 3), else growing it (invariant 4).
 * `nextSeq` is the seq after the batch.
 */
export function planPaddedAppend(tail: TailExtent, body: Buffer, trailer: Buffer, nextSeq: number): PaddedWrite {
  const unit = body.length + trailer.length
  const end = tail.committedEnd + unit
  if (tail.fileEnd > tail.committedEnd && end + MIN_PADDING <= tail.fileEnd) {
    const batch: [number, Buffer[]] = [tail.committedEnd, [body, trailer, encodePadHeader(tail.fileEnd - end - PAD_HEADER_BYTES)]]
    // Within a checkpoint of the newest slot: the batch is the only write (invariant 3).
    if (end - tail.checkpoint <= checkpointDistance(end)) {
      return { writes: [batch], grows: false, bytes: unit + PAD_HEADER_BYTES, tail: { ...tail, committedEnd: end } }
    }
    const generation = tail.generation + 1
    const slot = encodeSlot({ generation, end, nextSeq, trailerCheck: trailerCheckOf(trailer) })
    const slotAt = tail.fileEnd - SLOTS_BYTES + (generation & 1) * SLOT_BYTES
    return {
      writes: [batch, [slotAt, [slot]]],
      grows: false,
      bytes: unit + PAD_HEADER_BYTES + SLOT_BYTES,
      tail: { committedEnd: end, fileEnd: tail.fileEnd, generation, checkpoint: end },
    }
  }
  const generation = tail.generation + 1
  const slot = encodeSlot({ generation, end, nextSeq, trailerCheck: trailerCheckOf(trailer) })
  const growth = Math.min(MAX_PAD_GROWTH, Math.floor(end / GROWTH_DIVISOR))
  const fileEnd = Math.ceil((end + MIN_PADDING + growth) / BLOCK) * BLOCK
  const zeros = Buffer.alloc(fileEnd - end - MIN_PADDING)
  // Both slots: the new one in its place, the other empty (never a stale slot of an earlier padding).
  const empty = Buffer.alloc(SLOT_BYTES)
  const slots = (generation & 1) === 0 ? [slot, empty] : [empty, slot]
  return {
    writes: [[tail.committedEnd, [body, trailer, encodePadHeader(fileEnd - end - PAD_HEADER_BYTES), zeros, ...slots]]],
    grows: true,
    bytes: fileEnd - tail.committedEnd,
    tail: { committedEnd: end, fileEnd, generation, checkpoint: end },
  }
}

function writeU64(out: Buffer, value: number, at: number): void {
  out.writeUInt32LE(value % 0x1_0000_0000, at)
  out.writeUInt32LE(Math.floor(value / 0x1_0000_0000), at + 4)
}

function readU64(buf: Buffer, at: number): number {
  return buf.readUInt32LE(at + 4) * 0x1_0000_0000 + buf.readUInt32LE(at)
}

/** One slot write (`planSettledSlot`): at `at`, and the tail after it. */
export interface SettledSlot {
  readonly at: number
  readonly slot: Buffer
  readonly tail: TailExtent
}

/**
 * The slot that brings a padded log's newest slot to its committed end
 * (invariant 3: a writer releasing the log in order), and the tail after it;
 * `undefined` when there is no padding or the newest slot names that end.
 */
export function planSettledSlot(tail: TailExtent, nextSeq: number, trailerCheck: number): SettledSlot | undefined {
  if (tail.fileEnd === tail.committedEnd || tail.checkpoint === tail.committedEnd) return undefined
  const generation = tail.generation + 1
  return {
    at: tail.fileEnd - SLOTS_BYTES + (generation & 1) * SLOT_BYTES,
    slot: encodeSlot({ generation, end: tail.committedEnd, nextSeq, trailerCheck }),
    tail: { ...tail, generation, checkpoint: tail.committedEnd },
  }
}

/** Whether a file of this size may be a padded log (padding always ends on a 4 KiB boundary): a cheap filter before reading slots. */
export function mayBePadded(compression: string, size: number): boolean {
  return compression === 'zstd' && size >= BLOCK && size % BLOCK === 0
}
