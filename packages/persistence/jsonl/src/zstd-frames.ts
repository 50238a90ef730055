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

const RAW_BLOCK = 0
const RLE_BLOCK = 1

/**
 * `plain` as one standard zstd frame of raw (stored) blocks: single segment,
 * content size in the header, no checksum, no dictionary. Any zstd decoder
 * reads it; `storedFramesContent` reads it without one.
 */
export function rawZstdFrame(plain: Uint8Array): Buffer {
  const size = plain.length
  // Frame content size field: 1 byte below 256, 2 bytes (minus 256) below 65,792, else 4 bytes.
  const [flag, fcsBytes] = size < 256 ? [0, 1] : size < 65_792 ? [1, 2] : [2, 4]
  const blocks = Math.max(1, Math.ceil(size / MAX_BLOCK))
  const out = Buffer.allocUnsafe(4 + 1 + fcsBytes + blocks * 3 + size)
  out.writeUInt32LE(ZSTD_MAGIC, 0)
  out[4] = (flag << 6) | 0x20
  if (fcsBytes === 1) out[5] = size
  else if (fcsBytes === 2) out.writeUInt16LE(size - 256, 5)
  else out.writeUInt32LE(size, 5)
  let at = 5 + fcsBytes
  for (let block = 0, from = 0; block < blocks; block++) {
    const length = Math.min(MAX_BLOCK, size - from)
    const last = block === blocks - 1 ? 1 : 0
    const blockHeader = last | (RAW_BLOCK << 1) | (length << 3)
    out[at] = blockHeader & 0xff
    out[at + 1] = (blockHeader >>> 8) & 0xff
    out[at + 2] = (blockHeader >>> 16) & 0xff
    out.set(plain.subarray(from, from + length), at + 3)
    at += 3 + length
    from += length
  }
  return out
}

/**
 * The content of a concatenation of zstd frames (skippable frames included)
 * when every data frame holds only raw or RLE blocks, no dictionary and no
 * checksum, and each frame's blocks add up to its recorded content size;
 * `undefined` otherwise (no data frame, compressed blocks, or anything unexpected: the
 * caller then decodes with libzstd, which reports damage precisely).
 */
export function storedFramesContent(buf: Uint8Array): Buffer | undefined {
  const parts: Uint8Array[] = []
  let frames = 0
  let pos = 0
  while (pos < buf.length) {
    if (pos + 8 > buf.length) return undefined
    const magic = (buf[pos]! | (buf[pos + 1]! << 8) | (buf[pos + 2]! << 16) | (buf[pos + 3]! << 24)) >>> 0
    if ((magic & 0xfffffff0) === 0x184d2a50) {
      const skip = (buf[pos + 4]! | (buf[pos + 5]! << 8) | (buf[pos + 6]! << 16) | (buf[pos + 7]! << 24)) >>> 0
      pos += 8 + skip
      if (pos > buf.length) return undefined
      continue
    }
    if (magic !== ZSTD_MAGIC) return undefined
    const descriptor = buf[pos + 4]!
    const contentSizeFlag = descriptor >> 6
    const singleSegment = (descriptor >> 5) & 1
    // Only what rawZstdFrame writes: single segment, no checksum, no dictionary, no reserved bits.
    if (singleSegment !== 1 || (descriptor & 0x1f) !== 0) return undefined
    const fcsBytes = contentSizeFlag === 0 ? 1 : CONTENT_SIZE_BYTES[contentSizeFlag]!
    let at = pos + 5 + fcsBytes
    if (at > buf.length) return undefined
    let contentSize: number
    if (fcsBytes === 1) contentSize = buf[pos + 5]!
    else if (fcsBytes === 2) contentSize = (buf[pos + 5]! | (buf[pos + 6]! << 8)) + 256
    else if (fcsBytes === 4) contentSize = (buf[pos + 5]! | (buf[pos + 6]! << 8) | (buf[pos + 7]! << 16) | (buf[pos + 8]! << 24)) >>> 0
    else return undefined
    let produced = 0
    for (;;) {
      if (at + 3 > buf.length) return undefined
      const blockHeader = buf[at]! | (buf[at + 1]! << 8) | (buf[at + 2]! << 16)
      const last = blockHeader & 1
      const type = (blockHeader >> 1) & 3
      const size = blockHeader >>> 3
      if (size > MAX_BLOCK) return undefined
      if (type === RAW_BLOCK) {
        if (at + 3 + size > buf.length) return undefined
        parts.push(buf.subarray(at + 3, at + 3 + size))
        at += 3 + size
      } else if (type === RLE_BLOCK) {
        if (at + 4 > buf.length) return undefined
        parts.push(new Uint8Array(size).fill(buf[at + 3]!))
        at += 4
      } else return undefined
      produced += size
      if (last) break
    }
    if (produced !== contentSize) return undefined
    frames++
    pos = at
  }
  return frames > 0 ? Buffer.concat(parts) : undefined
}
