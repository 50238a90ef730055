import { execFileSync } from 'node:child_process'
import { closeSync, existsSync, mkdirSync, openSync, writeSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { LINE_MAX_BYTES, V0_FRAME_MAX_BYTES } from '@dsh/protocol/limits'
import { beforeAll, describe, expect, it } from 'vitest'
import type * as Binding from 'zstd-napi/binding.js'
import { encodeFrame, headerLineText, v0LogPath } from '../src/index.js'
import { T0, tempDir } from './fixtures.js'

/**
 * The import's size caps, with the memory they cost measured: each import
 * runs in a fresh process (the built packages, `tests/workers/import-rss.mjs`)
 * that reports its peak resident set size. Fixtures are generated streaming,
 * a chunk at a time, so the test process never holds a large string either.
 * Bounds are counts of bytes, far above what a refusal costs and far below
 * what loading the line or frame costs (a 200 MB line took 1.1 GB to import
 * and show, a frame of 1 GiB of zeros 1.1-2.2 GB).
 */

const here = dirname(fileURLToPath(import.meta.url))
const binding = createRequire(import.meta.url)('zstd-napi/binding.js') as typeof Binding
const MiB = 1024 * 1024

beforeAll(() => {
  if (!existsSync(join(here, '..', 'dist', 'index.js')))
    throw new Error('Build first: npx turbo run build --filter=@dsh/session-import-v0...')
})

interface Outcome {
  readonly sessions: { status: string; code?: string; message?: string }[]
  readonly maxRss: number
}

function importInChild(from: string): Outcome {
  const root = tempDir('caps-root')
  const out = execFileSync(process.execPath, [join(here, 'workers', 'import-rss.mjs'), from, root], {
    encoding: 'utf8',
    timeout: 300_000,
    maxBuffer: 16 * MiB,
  })
  return JSON.parse(out.trim().split('\n').at(-1)!) as Outcome
}

/** A fresh v0 root and where the log of session `id` goes in it. */
function logFile(id: string, compression: 'zstd' | 'none'): { from: string; path: string; header: string } {
  const from = tempDir('caps-from')
  const header = { id, createdAt: T0, cwd: '/work', delegationDepth: 0 }
  const path = v0LogPath(from, id, header.cwd, compression)
  mkdirSync(dirname(path), { recursive: true })
  return { from, path, header: `${headerLineText(header)}\n` }
}

/** `bytes` of 'x' written to `fd` 1 MiB at a time. */
function writeFiller(fd: number, bytes: number): void {
  const chunk = Buffer.alloc(MiB, 'x')
  for (let left = bytes; left > 0; left -= MiB) writeSync(fd, chunk, 0, Math.min(MiB, left))
}

/** One zstd frame (content checksum, as v0 writes) of `bytes` bytes made by `fill`, compressed a chunk at a time; `stated`: the header states its size. */
function streamFrame(fd: number, bytes: number, fill: (chunk: Buffer, offset: number) => void, stated: boolean): void {
  const cctx = new binding.CCtx()
  cctx.setParameter(binding.CParameter.checksumFlag, 1)
  cctx.setParameter(binding.CParameter.compressionLevel, 1)
  if (stated) cctx.setPledgedSrcSize(bytes)
  const chunk = Buffer.alloc(MiB)
  const out = Buffer.allocUnsafe(binding.cStreamOutSize())
  for (let offset = 0; offset < bytes; offset += MiB) {
    const length = Math.min(MiB, bytes - offset)
    fill(chunk, offset)
    const last = offset + length >= bytes
    let input = chunk.subarray(0, length)
    for (;;) {
      const [remaining, produced, consumed] = cctx.compressStream2(
        out,
        input,
        last ? binding.EndDirective.end : binding.EndDirective.continue,
      )
      writeSync(fd, out, 0, produced)
      input = input.subarray(consumed)
      if (last ? remaining === 0 : input.length === 0) break
    }
  }
}

describe('v0 import size caps', () => {
  it('a plain log holding a 200 MB line is refused with IMPORT_V0_LINE_TOO_LARGE, in memory far below the line', () => {
    const { from, path, header } = logFile('huge-line', 'none')
    const fd = openSync(path, 'w')
    writeSync(fd, header)
    writeSync(fd, `{"type":"user/message","seq":0,"time":${T0},"data":{"text":"`)
    writeFiller(fd, 200 * 1000 * 1000)
    writeSync(fd, '"}}\n')
    closeSync(fd)
    const { sessions, maxRss } = importInChild(from)
    expect(sessions).toMatchObject([{ status: 'failed', code: 'IMPORT_V0_LINE_TOO_LARGE' }])
    expect(sessions[0]!.message).toContain('Line 2 ')
    expect(maxRss).toBeLessThan(120 * MiB)
  })

  it('a zstd log whose frame holds a line over LINE_MAX_BYTES is refused with IMPORT_V0_LINE_TOO_LARGE, the line never decoded to text', () => {
    const { from, path, header } = logFile('long-line-frame', 'zstd')
    const fd = openSync(path, 'w')
    writeSync(fd, encodeFrame(Buffer.from(header)))
    const prefix = Buffer.from(`{"type":"user/message","seq":0,"time":${T0},"data":{"text":"`)
    const suffix = Buffer.from('"}}\n')
    const bytes = LINE_MAX_BYTES + 4 * MiB
    streamFrame(
      fd,
      bytes,
      (chunk, offset) => {
        chunk.fill('x')
        if (offset === 0) prefix.copy(chunk)
        if (offset + MiB >= bytes) suffix.copy(chunk, bytes - offset - suffix.length)
      },
      true,
    )
    closeSync(fd)
    const { sessions, maxRss } = importInChild(from)
    expect(sessions).toMatchObject([{ status: 'failed', code: 'IMPORT_V0_LINE_TOO_LARGE' }])
    // The frame is decoded (it is under the frame cap); its text is not.
    expect(maxRss).toBeLessThan(bytes + 160 * MiB)
  })

  it.each([
    ['states its size', true],
    ['does not state its size (decoded as a stream up to the cap)', false],
  ])('a frame of 1 GiB of zeros that %s is refused with IMPORT_V0_FRAME_TOO_LARGE in bounded memory', (_how, stated) => {
    const { from, path, header } = logFile(stated ? 'zeros-stated' : 'zeros-streamed', 'zstd')
    const fd = openSync(path, 'w')
    writeSync(fd, encodeFrame(Buffer.from(header)))
    streamFrame(fd, 1024 * MiB, () => {}, stated)
    closeSync(fd)
    const { sessions, maxRss } = importInChild(from)
    expect(sessions).toMatchObject([{ status: 'failed', code: 'IMPORT_V0_FRAME_TOO_LARGE' }])
    expect(sessions[0]!.message).toContain('Frame 1 ')
    // Refused from the header: no plaintext at all; streamed: at most the cap of it.
    expect(maxRss).toBeLessThan((stated ? 0 : V0_FRAME_MAX_BYTES) + 160 * MiB)
  })
})
