import type { LogCodec } from './codec.js'
import type { RevisionSlot } from './fs-io.js'
import {
  checkpointDistance,
  type EndSlot,
  mayBePadded,
  newestSlot,
  PAD_HEADER_BYTES,
  padContentSize,
  SLOTS_BYTES,
  trailerCheckOf,
} from './log-padding.js'
import type { TrailerFields } from './trailer.js'

/**
 * Where a log's committed part ends, found from its last few bytes — never
 * from its body. One implementation for both callers: a fresh writer's tail
 * check and `#locateCut` read asynchronously, a fork's synchronous locate
 * (`fork-refs.ts`) reads on the calling thread. The search is a generator
 * that yields the reads it needs (`[position, length]`) and is resumed with
 * the bytes read; `tailSync` and `tailAsync` drive it.
 */

/** Where a log's committed part ends, and (padded logs) where its padding ends and the newest slot's generation. */
export interface VerifiedTail {
  readonly committedEnd: number
  readonly nextSeq: number
  /** The file's size: `committedEnd` when the log has no padding. */
  readonly fileEnd: number
  /** The newest end slot's generation (0 without padding). */
  readonly generation: number
  /** The end the newest slot names (`committedEnd` without padding). */
  readonly checkpoint: number
  /** The revision at the committed end (padded logs); `undefined` without padding. */
  readonly slot: RevisionSlot | undefined
}

/** The last committed batch's trailer and the tail it ends. */
export interface LastBatch {
  readonly trailer: TrailerFields
  readonly tail: VerifiedTail
}

/** One read the search needs: `length` bytes at `position` (fewer at the end of the file). */
export type TailRead = readonly [position: number, length: number]

export type TailSearch = Generator<TailRead, LastBatch | undefined, Buffer>

/**
 * The last committed batch of a log of `size` bytes whose header unit ends at
 * `headerEnd`: behind a padded log's settled newest slot (two small reads), or
 * the trailer ending the file (one). `undefined` when the tail is anything
 * else — a torn write never ends in either — and the caller scans the log.
 */
export function* lastBatch(codec: LogCodec, size: number, headerEnd: number): TailSearch {
  return (yield* paddedTail(codec, size, headerEnd)) ?? (yield* trailerAtEnd(codec, size, headerEnd))
}

/** Where the walk from a padded log's newest slot ended (`walkToPadding`). */
export interface PaddedEnd {
  readonly slot: EndSlot
  /** The end reached and the last trailer's CRC field; settled when a padding frame starts there and reaches the end of the file. */
  readonly revision: RevisionSlot
  readonly nextSeq: number
  /** The last batch's trailer (self-checked), when settled. */
  readonly trailer: TrailerFields | undefined
}

/**
 * The committed end of a padded log of `size` bytes (see `log-padding.ts`,
 * invariant 2): from the newest valid end slot, whose batch trailer must
 * agree with it (self-checked, the CRC field the slot recorded, the slot's
 * next seq), over the units written after it — each a complete body by its
 * structure and a self-checked batch trailer of its length continuing the
 * seqs — to a padding frame header reaching exactly the end of the file. A
 * fresh slot costs two small reads; a slot behind, one more read of the
 * most a writer leaves after it (`checkpointDistance`). Unsettled (the
 * slot's end, not trusted) when the walk meets anything else: a torn or
 * damaged tail, or an append in flight; `undefined` without a valid slot.
 */
export function* walkToPadding(codec: LogCodec, size: number, headerEnd: number): Generator<TailRead, PaddedEnd | undefined, Buffer> {
  const trailerSize = codec.trailer.size
  if (!mayBePadded(codec.compression, size) || size < headerEnd + trailerSize + PAD_HEADER_BYTES + SLOTS_BYTES) return undefined
  const slot = newestSlot(yield [size - SLOTS_BYTES, SLOTS_BYTES])
  if (slot === undefined) return undefined
  const unsettled: PaddedEnd = {
    slot,
    revision: { end: slot.end, trailerCheck: slot.trailerCheck, settled: false },
    nextSeq: slot.nextSeq,
    trailer: undefined,
  }
  // Units and the padding frame's header lie before the slots.
  const limit = size - SLOTS_BYTES
  if (slot.end < headerEnd + trailerSize || slot.end + PAD_HEADER_BYTES > limit) return unsettled
  let buf = yield [slot.end - trailerSize, trailerSize + PAD_HEADER_BYTES]
  let base = slot.end - trailerSize
  let trailer = codec.trailer.decode(buf, 0)
  if (
    trailer === undefined ||
    trailer.kind !== 'batch' ||
    trailer.count === 0 ||
    trailerCheckOf(buf.subarray(0, trailerSize)) !== slot.trailerCheck ||
    trailer.firstSeq + trailer.count !== slot.nextSeq ||
    slot.end - trailerSize - trailer.bodyLength < headerEnd
  )
    return unsettled
  // What a writer leaves after the slot fits one read (more only behind a torn newest slot: doubling).
  const walkRead = checkpointDistance(size) + PAD_HEADER_BYTES
  let end = slot.end
  let nextSeq = slot.nextSeq
  let trailerCheck = slot.trailerCheck
  for (;;) {
    const at = end - base
    const content = padContentSize(buf, at)
    if (content !== undefined && end + PAD_HEADER_BYTES + content === size) {
      return { slot, revision: { end, trailerCheck, settled: true }, nextSeq, trailer }
    }
    const extent = content === undefined ? codec.measureBody(buf, at) : undefined
    if (extent?.status === 'incomplete' || (extent?.status === 'complete' && extent.end + trailerSize > buf.length)) {
      // The unit (or the padding frame's header) goes on past what was read: read on from its start.
      const had = buf.length - at
      if (base + buf.length >= limit) return unsettled
      buf = yield [end, Math.min(limit - end, Math.max(walkRead, 2 * had))]
      base = end
      // A file that shrank meanwhile (the read returned no more bytes than it had): not trusted.
      if (buf.length <= had) return unsettled
      continue
    }
    if (extent?.status !== 'complete') return unsettled
    const next = codec.trailer.decode(buf, extent.end)
    if (next === undefined || next.kind !== 'batch' || next.count === 0 || next.bodyLength !== extent.end - at || next.firstSeq !== nextSeq)
      return unsettled
    trailer = next
    trailerCheck = trailerCheckOf(buf.subarray(extent.end, extent.end + trailerSize))
    nextSeq += next.count
    end = base + extent.end + trailerSize
  }
}

/** The tail of a padded log: where the walk from its newest slot settles (`walkToPadding`). */
function* paddedTail(codec: LogCodec, size: number, headerEnd: number): TailSearch {
  const found = yield* walkToPadding(codec, size, headerEnd)
  if (found === undefined || !found.revision.settled || found.trailer === undefined) return undefined
  const { slot, revision, nextSeq, trailer } = found
  return {
    trailer,
    tail: { committedEnd: revision.end, nextSeq, fileEnd: size, generation: slot.generation, checkpoint: slot.end, slot: revision },
  }
}

/** The last batch's trailer when it ends the file. */
function* trailerAtEnd(codec: LogCodec, size: number, headerEnd: number): TailSearch {
  const trailerSize = codec.trailer.size
  if (size < headerEnd + trailerSize) return undefined
  const trailer = codec.trailer.decode(yield [size - trailerSize, trailerSize], 0)
  if (trailer === undefined || trailer.kind !== 'batch' || trailer.count === 0 || size - trailerSize - trailer.bodyLength < headerEnd)
    return undefined
  return {
    trailer,
    tail: {
      committedEnd: size,
      nextSeq: trailer.firstSeq + trailer.count,
      fileEnd: size,
      generation: 0,
      checkpoint: size,
      slot: undefined,
    },
  }
}

/** Runs a search with synchronous reads. */
export function tailSync<T>(search: Generator<TailRead, T, Buffer>, read: (position: number, length: number) => Buffer): T {
  let step = search.next()
  while (!step.done) step = search.next(read(...step.value))
  return step.value
}

/** Runs a search with asynchronous reads. */
export async function tailAsync<T>(
  search: Generator<TailRead, T, Buffer>,
  read: (position: number, length: number) => Promise<Buffer>,
): Promise<T> {
  let step = search.next()
  while (!step.done) step = search.next(await read(...step.value))
  return step.value
}
