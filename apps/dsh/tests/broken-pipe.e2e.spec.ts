import { execFile, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { createHost } from '@dsh/host'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

// `dsh show … | head`: the reader closes the pipe after its first lines. The
// CLI must exit quietly with status 0 (see src/broken-pipe.ts), never crash
// with an unhandled EPIPE. Real pipes, real processes; the output is made
// larger than a pipe's buffer by count (events × text), so the CLI is still
// writing when the pipe closes.

const bin = join(import.meta.dirname, '..', 'dist', 'bin.cjs')
/** One history page of the largest size `show --limit` takes (the protocol's PAGE_MAX_LIMIT). */
const EVENTS = 1_000

let dir: string
let root: string

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'dsh-pipe-'))
  root = join(dir, 'root')
  const host = await createHost({ root })
  try {
    const session = host.sessions.create({ id: 'long' })
    for (let i = 0; i < EVENTS; i++) session.append('user/message', { text: `line ${i} ${'of a long transcript '.repeat(12)}` })
    await host.sessions.dispose(session.id)
  } finally {
    await host.dispose()
  }
})

afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** Runs dsh with stdout piped to this process, destroys our end after the first chunk; resolves the exit status, signal, stderr and bytes read. */
async function readFirstChunk(
  args: readonly string[],
): Promise<{ code: number | null; signal: string | null; stderr: string; read: number }> {
  const child = spawn(process.execPath, [bin, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stderr = ''
  let read = 0
  child.stderr.setEncoding('utf8')
  child.stderr.on('data', (chunk: string) => {
    stderr += chunk
  })
  child.stdout.once('data', (chunk: Buffer) => {
    read = chunk.length
    child.stdout.destroy()
  })
  const [code, signal] = await new Promise<[number | null, string | null]>((resolve) => child.once('close', (c, s) => resolve([c, s])))
  return { code, signal, stderr, read }
}

describe('stdout closed early', () => {
  it.each([
    ['show', ['show', 'long', '--limit', String(EVENTS)]],
    ['show --json', ['show', 'long', '--limit', String(EVENTS), '--json']],
  ])('%s exits 0 without a word on stderr once the reader is gone', async (_name, args) => {
    const result = await readFirstChunk([...args, '--root', root])
    expect(result.read).toBeGreaterThan(0)
    expect(result).toMatchObject({ code: 0, signal: null, stderr: '' })
  })

  it('the whole output really is larger than a pipe buffer (so the reader closed it mid-stream)', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [bin, 'show', 'long', '--limit', String(EVENTS), '--root', root], {
      maxBuffer: 64 * 1024 * 1024,
    })
    // Linux pipes buffer 64 KiB: the rest of the output met a closed pipe.
    expect(stdout.length).toBeGreaterThan(65_536)
  })

  it('`dsh show … | head -n 1` succeeds under set -o pipefail', async () => {
    const script = `set -o pipefail; "${process.execPath}" "${bin}" show long --limit ${EVENTS} --root "${root}" | head -n 1`
    const { stdout, stderr } = await promisify(execFile)('bash', ['-c', script])
    expect(stdout).toBe('session long\n')
    expect(stderr).toBe('')
  })
})
