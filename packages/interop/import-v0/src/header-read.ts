import { promises as fsp } from 'node:fs'
import { LINE_MAX_BYTES } from '@dsh/protocol/limits'
import { ImportV0Error, lineTooLarge } from './errors.js'
import type { V0LogEntry } from './listing.js'
import { assertPlaced } from './reader.js'
import { parseHeaderLine, type V0Header } from './v0-types.js'
import { decodeFrames } from './zstd-frames.js'

/**
 * A v0 log's header alone, reading only the first bytes of the file (frame 0
 * is one short line), and the check that the log sits where the header's id
 * and cwd put it.
 */

const FIRST_READ = 64 * 1024

export async function readV0Header(root: string, entry: V0LogEntry): Promise<V0Header> {
  let handle: fsp.FileHandle
  try {
    handle = await fsp.open(entry.path, 'r')
  } catch (error) {
    throw new ImportV0Error('IMPORT_V0_IO', `Cannot open ${entry.path}: ${(error as Error).message}`, { cause: error })
  }
  let header: V0Header
  try {
    let size = FIRST_READ
    for (;;) {
      const buffer = Buffer.allocUnsafe(size)
      const { bytesRead } = await handle.read(buffer, 0, size, 0)
      const bytes = buffer.subarray(0, bytesRead)
      const line = firstLine(bytes, entry.compression, bytesRead < size)
      if (line !== undefined) {
        header = parseHeaderLine(line)
        break
      }
      // A header line (or frame 0) is never read past the line cap.
      if (size > LINE_MAX_BYTES) throw lineTooLarge(1, bytesRead)
      size = Math.min(size * 4, LINE_MAX_BYTES + 1)
    }
  } finally {
    await handle.close()
  }
  assertPlaced(root, header, entry)
  return header
}

/** The header line text, or `undefined` when more bytes are needed. `whole`: `bytes` is the entire file. */
function firstLine(bytes: Buffer, compression: V0LogEntry['compression'], whole: boolean): string | undefined {
  if (compression === 'none') {
    const end = bytes.indexOf(0x0a)
    if (end >= 0) return bytes.toString('utf8', 0, end)
    if (whole) throw new ImportV0Error('IMPORT_V0_BAD_HEADER', 'The log has no complete first line: its header was never committed.')
    return undefined
  }
  const { frames } = decodeFrames(bytes, 1)
  const first = frames[0]
  if (first === undefined) {
    if (whole) throw new ImportV0Error('IMPORT_V0_BAD_HEADER', 'The log holds no complete frame: its header was never committed.')
    return undefined
  }
  if (first.length === 0 || first.indexOf(0x0a) !== first.length - 1)
    throw new ImportV0Error('IMPORT_V0_BAD_HEADER', 'Frame 0 must hold exactly the header line.')
  return first.toString('utf8', 0, first.length - 1)
}
