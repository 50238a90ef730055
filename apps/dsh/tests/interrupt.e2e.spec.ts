import { execFileSync } from 'node:child_process'
import { closeSync, constants, existsSync, mkdtempSync, openSync, readdirSync, rmSync, writeSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { cleanEnv, dshRun, dshStart, type Started, until } from './support/dsh-process.js'
import { dsh, indexGeneration, listedIds, sessionId, snapshot, writeIndexed } from './support/index-root.js'

// Ctrl-C during `dsh reindex` or `dsh export` cancels the job through its own
// cancellation: what it wrote is removed, one line says so, and the status is
// 130. The built CLI runs in its own process and is sent a real SIGINT. Each
// job is held midway (a FIFO named by DSH_REINDEX_HOLD / DSH_EXPORT_HOLD, with
// its partial files on disk) and let go only once the CLI has said it took
// the signal, so "midway" is an order of events, not a matter of timing.

const cleanups: Array<() => void> = []
afterEach(() => {
  while (cleanups.length > 0) cleanups.pop()!()
})

function scratch(): string {
  const dir = mkdtempSync(join(tmpdir(), 'dsh-interrupt-'))
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

function fifoIn(dir: string): string {
  const fifo = join(dir, 'hold')
  execFileSync('mkfifo', ['-m', '600', fifo])
  return fifo
}

/** Writes a word into the FIFO for whoever reads it; with no reader the FIFO refuses the writer (ENXIO) and nothing blocks. */
function release(fifo: string): void {
  try {
    const fd = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK)
    try {
      writeSync(fd, 'go\n')
    } finally {
      closeSync(fd)
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENXIO') throw error
  }
}

/** Starts `dsh args…` held at `fifo`; resolves once it says it is held. */
async function startHeld(args: readonly string[], hold: Record<string, string>, fifo: string): Promise<Started> {
  const started = dshStart(args, cleanEnv({ DSH_STORE: '', DSH_DATABASE_URL: '', ...hold }))
  cleanups.push(() => started.child.kill('SIGKILL'))
  // Opening the FIFO for reading waits for the job to reach its hold and say so (a job that ends without holding ends the wait).
  let held = false
  const exited = started.exited.then((code) => {
    // Lets the read below go, when it still waits.
    if (!held) release(fifo)
    return `exited with ${code} before its hold: ${started.output()}`
  })
  expect(await Promise.race([readFile(fifo, 'utf8'), exited])).toBe('held\n')
  held = true
  return started
}

/**
 * Sends SIGINT, waits until the CLI has said it took it (or has exited, as a
 * process without a handler does), then lets the hold go.
 */
async function interrupt(started: Started, fifo: string): Promise<number | null> {
  started.child.kill('SIGINT')
  let exited = false
  void started.exited.then(() => (exited = true))
  await until(() => exited || started.output().includes('dsh: interrupted:'), 'the word of the interrupt')
  release(fifo)
  return started.exited
}

/** The one line the CLI printed, and nothing else. */
function expectOneLine(output: string, pattern: RegExp): void {
  const lines = output.split('\n').filter((line) => line.length > 0)
  expect(lines, output).toHaveLength(1)
  expect(lines[0]).toMatch(pattern)
}

describe('SIGINT', () => {
  it('during dsh reindex removes the new index file, keeps the old index, exits 130 with one line', async () => {
    const dir = scratch()
    const root = join(dir, 'root')
    await writeIndexed(root, 'a', 40, 'heron')
    const old = indexGeneration(root)
    const before = snapshot(root)
    const indexFiles = () => readdirSync(join(root, '.dsh')).filter((name) => name.startsWith('index'))
    const indexBefore = indexFiles()
    const fifo = fifoIn(dir)

    const started = await startHeld(['reindex', '--root', root, '--json'], { DSH_REINDEX_HOLD: fifo }, fifo)
    // Held with the new generation complete beside the old one: an extra index file.
    expect(indexFiles().length).toBeGreaterThan(indexBefore.length)

    const code = await interrupt(started, fifo)
    expect(code, started.output()).toBe(130)
    expectOneLine(started.output(), /^dsh: interrupted: the rebuild stops, its new index is removed and the old one stays/)
    // Not a byte changed: no new generation, no temporary file; the old index is the one in place.
    expect(snapshot(root)).toEqual(before)
    expect(indexFiles()).toEqual(indexBefore)
    expect(indexGeneration(root)).toBe(old)
    const listing = await dsh(['sessions', '--root', root, '--json'])
    expect(listing.code, listing.stderr).toBe(0)
    expect(listedIds(listing.stdout)).toHaveLength(40)
  })

  it('during dsh export removes its staging directory and the target it made, exits 130 with one line', async () => {
    const dir = scratch()
    const root = join(dir, 'root')
    await writeIndexed(root, 'a', 3, 'heron')
    const target = join(dir, 'out')
    const fifo = fifoIn(dir)
    const ids = [sessionId('a', 0), sessionId('a', 1), sessionId('a', 2)]

    const started = await startHeld(['export', ...ids, '--to', 'dsh-v0', target, '--root', root], { DSH_EXPORT_HOLD: fifo }, fifo)
    // Held before its first session read: the target and its staging directory exist.
    expect(readdirSync(target).filter((name) => name.startsWith('.dsh-export-'))).toHaveLength(1)

    const code = await interrupt(started, fifo)
    expect(code, started.output()).toBe(130)
    expectOneLine(started.output(), /^dsh: interrupted: the export stops and what it wrote under .*\/out is removed/)
    expect(existsSync(target)).toBe(false)

    // Into a directory that exists, the directory stays and only what the export wrote goes.
    const kept = join(dir, 'kept')
    execFileSync('mkdir', ['-m', '700', kept])
    const again = await startHeld(['export', ...ids, '--to', 'dsh-v0', kept, '--root', root], { DSH_EXPORT_HOLD: fifo }, fifo)
    expect(readdirSync(kept)).toHaveLength(1)
    expect(await interrupt(again, fifo)).toBe(130)
    expect(readdirSync(kept)).toEqual([])

    // Without a signal the same export completes.
    const done = await dshRun(['export', ...ids, '--to', 'dsh-v0', target, '--root', root, '--json'], cleanEnv())
    expect(done.code, done.stderr).toBe(0)
    expect(JSON.parse(done.stdout).sessions).toHaveLength(3)
  })
})
