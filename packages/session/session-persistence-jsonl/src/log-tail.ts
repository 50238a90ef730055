import type { LogCodec } from './codec.js'
import type { RevisionSlot } from './fs-io.js'
import { mayBePadded, newestSlot, PAD_HEADER_BYTES, revisionSlotOf, SLOTS_BYTES, trailerCheckOf } from './log-padding.js'
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
  /** The newest slot (the revision); `undefined` without padding. */
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

/**
 * The tail of a padded log (see `log-padding.ts`): the newest valid end
 * slot, confirmed by a padding frame starting at its end and reaching the
 * end of the file, and by the batch trailer before it (self-checked, the
 * CRC the slot recorded, the slot's next seq).
 */
function* paddedTail(codec: LogCodec, size: number, headerEnd: number): TailSearch {
  const trailerSize = codec.trailer.size
  if (!mayBePadded(codec.compression, size) || size < headerEnd + trailerSize + PAD_HEADER_BYTES + SLOTS_BYTES) return undefined
  const slot = newestSlot(yield [size - SLOTS_BYTES, SLOTS_BYTES])
  if (slot === undefined || slot.end < headerEnd + trailerSize || slot.end + PAD_HEADER_BYTES + SLOTS_BYTES > size) return undefined
  const around = yield [slot.end - trailerSize, trailerSize + PAD_HEADER_BYTES]
  // The padding frame must start at the slot's end and reach the end of the file (the slot is settled).
  const revision = revisionSlotOf(slot, around.subarray(trailerSize), size)
  if (!revision.settled) return undefined
  const trailer = codec.trailer.decode(around, 0)
  if (
    trailer === undefined ||
    trailer.kind !== 'batch' ||
    trailer.count === 0 ||
    trailerCheckOf(around.subarray(0, trailerSize)) !== slot.trailerCheck ||
    trailer.firstSeq + trailer.count !== slot.nextSeq ||
    slot.end - trailerSize - trailer.bodyLength < headerEnd
  )
    return undefined
  return {
    trailer,
    tail: { committedEnd: slot.end, nextSeq: slot.nextSeq, fileEnd: size, generation: slot.generation, slot: revision },
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
    tail: { committedEnd: size, nextSeq: trailer.firstSeq + trailer.count, fileEnd: size, generation: 0, slot: undefined },
  }
}

/** Runs a search with synchronous reads. */
export function tailSync(search: TailSearch, read: (position: number, length: number) => Buffer): LastBatch | undefined {
  let step = search.next()
  while (!step.done) step = search.next(read(...step.value))
  return step.value
}

/** Runs a search with asynchronous reads. */
export async function tailAsync(
  search: TailSearch,
  read: (position: number, length: number) => Promise<Buffer>,
): Promise<LastBatch | undefined> {
  let step = search.next()
  while (!step.done) step = search.next(await read(...step.value))
  return step.value
}
