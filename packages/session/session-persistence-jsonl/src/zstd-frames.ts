/**
 * Frame boundaries of a zstd stream, read from the frame and block headers
 * alone (RFC 8878 §3.1.1), so a log can be split into units without
 * decompressing it, and a torn frame is recognised by its missing bytes.
 */
export type FrameExtent =
  | { readonly status: 'complete'; readonly end: number }
  | { readonly status: 'incomplete' }
  | { readonly status: 'invalid'; readonly reason: string }

export const ZSTD_MAGIC = 0xfd2fb528
const MAX_BLOCK = 128 * 1024
const DICT_ID_BYTES = [0, 1, 2, 4] as const
const CONTENT_SIZE_BYTES = [0, 2, 4, 8] as const

/** Measures the zstd data frame starting at `pos`. */
export function measureZstdFrame(buf: Uint8Array, pos: number): FrameExtent {
  if (pos + 5 > buf.length) return { status: 'incomplete' }
  const magic = (buf[pos]! | (buf[pos + 1]! << 8) | (buf[pos + 2]! << 16) | (buf[pos + 3]! << 24)) >>> 0
  if (magic !== ZSTD_MAGIC) return { status: 'invalid', reason: 'no zstd frame magic' }
  const descriptor = buf[pos + 4]!
  if ((descriptor & 0x08) !== 0) return { status: 'invalid', reason: 'reserved frame header bit set' }
  const contentSizeFlag = descriptor >> 6
  const singleSegment = (descriptor >> 5) & 1
  const hasChecksum = (descriptor >> 2) & 1
  const headerBytes =
    1 +
    (singleSegment ? 0 : 1) +
    DICT_ID_BYTES[descriptor & 3]! +
    (contentSizeFlag === 0 ? singleSegment : CONTENT_SIZE_BYTES[contentSizeFlag]!)
  let at = pos + 4 + headerBytes
  for (;;) {
    if (at + 3 > buf.length) return { status: 'incomplete' }
    const blockHeader = buf[at]! | (buf[at + 1]! << 8) | (buf[at + 2]! << 16)
    const last = blockHeader & 1
    const type = (blockHeader >> 1) & 3
    const size = blockHeader >>> 3
    if (type === 3) return { status: 'invalid', reason: 'reserved block type' }
    if (size > MAX_BLOCK) return { status: 'invalid', reason: 'block larger than 128 KiB' }
    at += 3 + (type === 1 ? 1 : size)
    if (at > buf.length) return { status: 'incomplete' }
    if (last) break
  }
  if (hasChecksum) {
    at += 4
    if (at > buf.length) return { status: 'incomplete' }
  }
  return { status: 'complete', end: at }
}
