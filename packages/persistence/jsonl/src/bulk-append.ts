import { crc32 } from 'node:zlib'
import { type AppendedEvent, appendedEventCount } from '@dsh/session-persistence/backend'
import type { LogCodec } from './codec.js'
import { encodeEventLines } from './log-format.js'
import { encodeUnitParts } from './log-units.js'

/**
 * Bulk appends: encoding a large batch unit with its compression on the
 * libuv thread pool, so a caller appending megabytes at a time (an import:
 * 512 KiB batches, 100 MiB of event lines for a 100 MiB harness session)
 * does not spend the main thread on zstd while it could read the next batch.
 * A live session's appends are small and stay synchronous (`encodeBody`:
 * a pool round trip costs more than a small frame takes).
 *
 * Invariants:
 * - The unit holds exactly the lines `encodeEventLines` writes and a trailer
 *   of the same fields `encodeUnitParts` computes; only the compressed body's
 *   bytes may differ (another libzstd binding, the same level): a standard
 *   zstd frame without a checksum (nor, streamed, its content size: the
 *   trailer records the plaintext length), read like every other
 *   body by `decodeRun`, `scanLog` and `zstd -dc` (the trailer's CRC32s are
 *   the integrity check).
 * - Below `POOL_ENCODE_MIN` plaintext bytes, and for the plain encoding, the
 *   unit is `encodeUnitParts`'s, byte for byte.
 * - The plaintext's CRC32 is computed on the calling thread while the pool
 *   compresses; nothing is written here (the caller writes and syncs).
 *
 * Used by the append path (`writer.ts`, `create-log.ts`) and
 * materialization (`forks.ts`) through `encodeBatchUnit`: a batch
 * whose lines reach `POOL_ENCODE_MIN` bytes is encoded by `encodeOnPool`,
 * every other batch by `encodeUnitParts` (no pool round trip, no extra
 * await).
 */

/** Plaintext bytes from which a batch body is compressed on the pool (the size from which reads decode there too: `SYNC_DECODE_MAX`). */
export const POOL_ENCODE_MIN = 256 * 1024

/** Loaded on the first large batch only (a process that appends small batches never loads it; see `codec.ts`). */
let mongodbZstd: Promise<typeof import('@mongodb-js/zstd')> | undefined

/** Whether a batch whose lines take `plainLength` bytes is compressed on the libuv pool (`encodeOnPool`). */
export function encodesOnPool(codec: LogCodec, plainLength: number): boolean {
  return codec.compression === 'zstd' && plainLength >= POOL_ENCODE_MIN
}

/**
 * One batch unit `[body, trailer]` for `events` starting at `firstSeq`
 * (runs packed where the codec packs them: `LogCodec.packsRuns`):
 * synchronously for all but large zstd batches, whose body is compressed on
 * the libuv pool (a pool round trip costs more than a small frame takes).
 */
export function encodeBatchUnit(
  codec: LogCodec,
  events: readonly AppendedEvent[],
  firstSeq: number,
  count = appendedEventCount(events),
): [body: Buffer, trailer: Buffer] | Promise<[body: Buffer, trailer: Buffer]> {
  const plain = encodeEventLines(events, codec.packsRuns)
  if (!encodesOnPool(codec, plain.length)) return encodeUnitParts(codec, plain, 'batch', firstSeq, count)
  return encodeOnPool(codec, plain, firstSeq, count)
}

/** The unit of a batch of `count` events whose lines are `plain` (`encodesOnPool`): zstd on the pool, the CRC32 here meanwhile. */
export async function encodeOnPool(
  codec: LogCodec,
  plain: Buffer,
  firstSeq: number,
  count: number,
): Promise<[body: Buffer, trailer: Buffer]> {
  mongodbZstd ??= import('@mongodb-js/zstd')
  // libzstd's default level (3), as `encodeBody`.
  const compressing = mongodbZstd.then((zstd) => zstd.compress(plain))
  // Observed below; never an unhandled rejection while the CRC is computed.
  compressing.catch(() => {})
  const plainCrc = crc32(plain)
  const body = await compressing
  const trailer = codec.trailer.encode({
    kind: 'batch',
    plainLength: plain.length,
    plainCrc,
    bodyLength: body.length,
    bodyCrc: crc32(body),
    firstSeq,
    count,
  })
  return [body, trailer]
}
