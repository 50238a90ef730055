import { execFileSync } from 'node:child_process'
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createMemoryPersistence } from '@dsh/session-persistence'
import { portableCopy } from '@dsh/tooling/as-user'
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { exportV0 } from '../src/index.js'
import { T0, tempDir } from './fixtures.js'

/**
 * An export whose writes fail for real: a file size limit (`ulimit -f`, the
 * process gets EFBIG), a target this user may not write (the export runs as
 * the unprivileged `nobody` user with `runuser`, from a `portableCopy`: we run as root here and in
 * CI — elsewhere the test fails with the reason, it is never skipped), a
 * target under a file. Each is a typed error naming the path and the system
 * code, and the export leaves nothing behind.
 */

const worker = join(dirname(fileURLToPath(import.meta.url)), 'workers', 'export-memory.mjs')

beforeAll(() => {
  if (!existsSync(join(dirname(worker), '..', '..', 'dist', 'index.js')))
    throw new Error('Build first: npx turbo run build --filter=@dsh/session-import-v0...')
  if (process.getuid?.() !== 0)
    throw new Error('This test starts an export as the unprivileged user nobody with runuser: run it as root (CI does).')
})

interface Outcome {
  uid: number
  sessions?: string[]
  thrown?: { code: string; message: string; details: Record<string, unknown> }
}

const last = (out: string): Outcome => JSON.parse(out.trim().split('\n').at(-1) as string)

/** Everything under `dir`, relative, sorted. */
const tree = (dir: string): string[] => (readdirSync(dir, { recursive: true }) as string[]).sort()

describe('an export whose writes fail', () => {
  it('under a file size limit is IMPORT_V0_IO naming EFBIG, and removes the target it created', () => {
    const parent = tempDir('efbig')
    const to = join(parent, 'out')
    // 64 KiB of file at most; the noisy session's frame is ~1.3 MiB of base64 zstd cannot shrink below the limit.
    const out = execFileSync('bash', ['-c', 'ulimit -f 64 && exec "$0" "$@"', process.execPath, worker, to, String(1024 * 1024)], {
      encoding: 'utf8',
    })
    const { thrown } = last(out)
    expect(thrown).toMatchObject({
      code: 'IMPORT_V0_IO',
      message: expect.stringMatching(/^Cannot write .*noisy.*\(EFBIG\).*raise it and run it again\.$/),
      details: { code: 'EFBIG', path: expect.stringContaining(to) },
    })
    expect(tree(parent)).toEqual([])
  })

  it('into a directory this user may not write, or under one, is IMPORT_V0_IO naming EACCES, and writes nothing', () => {
    const parent = tempDir('eacces')
    chmodSync(parent, 0o755)
    const existing = join(parent, 'existing')
    mkdirSync(existing, { mode: 0o755 })
    // One world-readable copy of the worker and the built packages for both runs (what runNodeAs makes for one).
    const copy = portableCopy(worker, { packages: ['@dsh/session-import-v0', '@dsh/session-persistence'], resolveFrom: dirname(worker) })
    onTestFinished(copy.cleanup)
    const run = (to: string): Outcome =>
      last(execFileSync('runuser', ['-u', 'nobody', '--', process.execPath, copy.script, to, '16'], { cwd: copy.dir, encoding: 'utf8' }))
    const into = run(existing)
    expect(into.uid).toBe(65534)
    expect(into.thrown).toMatchObject({
      code: 'IMPORT_V0_IO',
      message: expect.stringContaining(`Cannot create a staging directory in ${existing} (EACCES)`),
      details: { code: 'EACCES', path: existing },
    })
    const under = join(parent, 'new', 'out')
    expect(run(under).thrown).toMatchObject({
      code: 'IMPORT_V0_IO',
      message: expect.stringContaining(`Cannot create the export target ${under} (EACCES)`),
      details: { code: 'EACCES', path: under },
    })
    expect(tree(parent)).toEqual(['existing'])
  })

  it('under a regular file is IMPORT_V0_INVALID_OPTION (the path cannot be a directory), the file unchanged', async () => {
    const parent = tempDir('enotdir')
    const file = join(parent, 'file')
    writeFileSync(file, 'a file')
    const persistence = createMemoryPersistence()
    const header = { version: 1 as const, id: 'a' as never, createdAt: T0, isSeeded: false, delegationDepth: 0 }
    await persistence.append({ header, inheritedEventCount: 0 as never }, [
      { type: 'turn/start', seq: 0 as never, time: T0, data: { turn: 1 } },
    ])
    await expect(exportV0({ ids: ['a'], persistence, to: join(file, 'out') })).rejects.toMatchObject({
      code: 'IMPORT_V0_INVALID_OPTION',
      details: { reason: 'not-a-directory', code: 'ENOTDIR' },
    })
    expect(readFileSync(file, 'utf8')).toBe('a file')
    expect(tree(parent)).toEqual(['file'])
  })
})
