import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, expect, it } from 'vitest'
import { rootWithOneSession } from './support/root.js'

// The CLI makes process.stderr only when it writes to it: making the stream
// for a pipe loads node:net, which a listing that prints nothing there does
// not need (src/broken-pipe.ts, guardedStderr).
const bin = join(import.meta.dirname, '..', 'dist', 'bin.cjs')
const probe = join(import.meta.dirname, 'support', 'stderr-probe.mjs')
const dir = mkdtempSync(join(tmpdir(), 'dsh-lazy-stderr-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

async function run(name: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string; probe: string }> {
  const file = join(dir, `${name}.probe`)
  const options = { timeout: 60_000, env: { ...process.env, DSH_STDERR_PROBE: file } }
  const result = await promisify(execFile)(process.execPath, ['--import', probe, bin, ...args], options).then(
    (r) => ({ code: 0, ...r }),
    (error: { code: number; stdout: string; stderr: string }) => error,
  )
  return { code: result.code, stdout: result.stdout, stderr: result.stderr, probe: readFileSync(file, 'utf8') }
}

it('a listing of an unchanged root never touches stderr', async () => {
  const root = join(dir, 'root')
  await rootWithOneSession(root, 'listed')
  // The first listing brings the index up to date (it reads the new log); the second is a plain listing.
  expect((await run('first', 'sessions', '--json', '--root', root)).code).toBe(0)
  const listed = await run('listing', 'sessions', '--json', '--root', root)
  expect(listed.code).toBe(0)
  expect(JSON.parse(listed.stdout).sessions.map((s: { header: { id: string } }) => s.header.id)).toEqual(['one'])
  expect(listed.stderr).toBe('')
  expect(listed.probe).toBe('untouched')
})

it('a command that fails still reports on stderr (the probe sees it)', async () => {
  const failed = await run('usage', 'sessions', '--limit', 'x', '--root', join(dir, 'root'))
  expect(failed.code).toBe(2)
  expect(failed.stderr).toMatch(/--limit must be an integer from 1 to/)
  expect(failed.probe).toMatch(/^touched/)
})
