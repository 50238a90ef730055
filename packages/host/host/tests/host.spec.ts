import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { isDshError, type Logger } from '@dsh/context'
import { describe, expect, it, onTestFinished, vi } from 'vitest'
import {
  checkDerivedFiles,
  createHost,
  derivedPaths,
  type Host,
  HostError,
  rebuildIndex,
  rootPermissionWarning,
  verifyRoot,
} from '../src/index.js'
import { scratchDir } from './support.js'

/** A fresh directory, removed when the current test finishes. */
/** Every path under `dir`, recursively, so "nothing was created" is checked by listing before and after. */
function listTree(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).sort()
}

async function expectCode(promise: Promise<unknown>, code: string): Promise<void> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(isDshError(error, code), `expected ${code}, got ${String(error)}`).toBe(true)
}

async function populate(root: string): Promise<{ parent: string; child: string }> {
  const host = await createHost({ root })
  try {
    const parent = host.sessions.create({ cwd: process.cwd() })
    parent.append('user/message', { text: 'hello subagents' })
    const child = host.subagents.spawn(parent, { mode: 'continuable', label: 'helper', context: 'fresh', prompt: 'help' })
    await child.done
    await host.sessions.flush(parent)
    return { parent: parent.id, child: child.id }
  } finally {
    await host.dispose()
  }
}

describe('createHost', () => {
  it('composes the embedded defaults: a catalog that survives a cold restart, derived files under the root, private modes', async () => {
    const root = join(scratchDir('dsh-host-'), 'root')
    const { parent, child } = await populate(root)
    expect(statSync(root).mode & 0o777).toBe(0o700)
    const host = await createHost({ root })
    try {
      expect(host.queryBackend).toBe('sqlite')
      expect(host.cache).toBeDefined()
      expect(host.paths).toEqual(derivedPaths(root))
      expect(existsSync(derivedPaths(root).index)).toBe(true)
      expect(existsSync(derivedPaths(root).projectionCache)).toBe(true)
      expect(derivedPaths(root).index.startsWith(root)).toBe(true)
      expect(await host.subagents.listChildren(parent)).toEqual([
        { kind: 'child', id: child, activity: 'inactive', hasChildren: false, mode: 'continuable', label: 'helper' },
      ])
      expect(host.http).toBeUndefined()
    } finally {
      await host.dispose()
    }
    const memory = await createHost({ root, query: 'memory', projectionCache: false })
    try {
      expect(memory.cache).toBeUndefined()
      expect(memory.queryBackend).toBe('memory')
      expect((await memory.query.listSessions({ parentSession: parent })).records.map((r) => r.header.id)).toEqual([child])
    } finally {
      await memory.dispose()
    }
  })

  it('read-only: opens an existing root, creates nothing, and answers from the logs without an index', async () => {
    const root = join(scratchDir('dsh-host-'), 'root')
    const { parent, child } = await populate(root)
    // Drop the derived files (and their WAL/shm companions) a writable host made.
    for (const file of Object.values(derivedPaths(root))) for (const suffix of ['', '-wal', '-shm']) rmSync(file + suffix, { force: true })
    const before = listTree(root)
    const host = await createHost({ root, readOnly: true })
    try {
      expect(host.readOnly).toBe(true)
      expect(host.queryBackend).toBe('sqlite')
      expect(host.cache).toBeUndefined()
      expect((await host.subagents.listChildren(parent)).map((r) => r.id)).toEqual([child])
    } finally {
      await host.dispose()
    }
    expect(listTree(root)).toEqual(before)
  })

  it('read-only: refuses a directory that is not a dsh root, and a missing one, without creating a file', async () => {
    const dir = scratchDir('dsh-host-')
    writeFileSync(join(dir, 'notes.txt'), 'not sessions')
    const before = listTree(dir)
    await expectCode(createHost({ root: dir, readOnly: true }), 'HOST_ROOT_INVALID')
    await expectCode(verifyRoot(dir), 'HOST_ROOT_INVALID')
    await expectCode(rebuildIndex({ root: dir }), 'HOST_ROOT_INVALID')
    expect(listTree(dir)).toEqual(before)
    await expectCode(createHost({ root: join(dir, 'missing'), readOnly: true }), 'HOST_ROOT_INVALID')
    expect(existsSync(join(dir, 'missing'))).toBe(false)
  })

  it('a file as the root, or under a file, is HOST_ROOT_INVALID (not a raw ENOTDIR)', async () => {
    const file = join(scratchDir('dsh-host-'), 'a-file')
    writeFileSync(file, 'x')
    await expectCode(createHost({ root: file }), 'HOST_ROOT_INVALID')
    await expectCode(createHost({ root: join(file, 'below') }), 'HOST_ROOT_INVALID')
  })

  it('bad options are HOST_INVALID_OPTIONS', async () => {
    const root = join(scratchDir('dsh-host-'), 'root')
    await expectCode(createHost({ root, query: 'mongo' as 'memory' }), 'HOST_INVALID_OPTIONS')
    await expectCode(createHost({ root: '' }), 'HOST_INVALID_OPTIONS')
    await expectCode(createHost({ root, readOnly: true, compression: 'none' }), 'HOST_INVALID_OPTIONS')
    await expectCode(createHost({ root, postgres: { connectionString: 'postgres://localhost/x' } }), 'HOST_INVALID_OPTIONS')
    expect(existsSync(root)).toBe(false)
    expect(new HostError('HOST_ROOT_INVALID', 'x').code).toBe('HOST_ROOT_INVALID')
  })

  it('passes coldReadConcurrency to the subagent runtime (default 4) and fails on a value outside 1..64', async () => {
    const root = join(scratchDir('dsh-host-'), 'root')
    const { parent, child } = await populate(root)
    const wide = await createHost({ root, coldReadConcurrency: 64 })
    try {
      expect(wide.subagents.coldReadConcurrency).toBe(64)
      expect((await wide.subagents.listChildren(parent)).map((r) => r.id)).toEqual([child])
    } finally {
      await wide.dispose()
    }
    const plain = await createHost({ root })
    try {
      expect(plain.subagents.coldReadConcurrency).toBe(4)
    } finally {
      await plain.dispose()
    }
    for (const bad of [0, 65, 1.5]) await expectCode(createHost({ root, coldReadConcurrency: bad }), 'SUBAGENT_INVALID_OPTIONS')
  })

  it('the HTTP API is a plugin: served on loopback with token auth, closed by dispose', async () => {
    const root = join(scratchDir('dsh-host-'), 'root')
    const { parent, child } = await populate(root)
    const token = 'host-test-token-0123456789'
    let host: Host | undefined = await createHost({ root, http: { token } })
    try {
      const url = host.http?.url
      expect(url).toBeDefined()
      expect(new URL(url!).hostname).toBe('127.0.0.1')
      expect(host.ctx.get('httpServer')).toBe(host.http)
      expect(host.ctx.get('httpApi')).toBeTypeOf('function')
      expect((await fetch(`${url}/api/sessions`)).status).toBe(401)
      const ok = await fetch(`${url}/api/sessions?parentSession=${encodeURIComponent(parent)}`, {
        headers: { authorization: `Bearer ${token}` },
      })
      expect(ok.status).toBe(200)
      expect(((await ok.json()) as { sessions: { header: { id: string } }[] }).sessions.map((s) => s.header.id)).toEqual([child])
      await host.dispose()
      host = undefined
      await expect(fetch(`${url}/api/sessions`)).rejects.toThrow()
    } finally {
      await host?.dispose()
    }
    // A bad token fails activation and leaves nothing open (the services activated before it are disposed).
    await expect(createHost({ root, http: { token: 'short' } })).rejects.toMatchObject({ code: 'API_INVALID_OPTIONS' })
    const again = await createHost({ root })
    await again.dispose()
  })
})

describe('verifyRoot and rebuildIndex', () => {
  it('verify reports every log; rebuild indexes them; neither writes a log', async () => {
    const root = join(scratchDir('dsh-host-'), 'root')
    const { parent, child } = await populate(root)
    const report = await verifyRoot(root)
    expect(report.logs.map((l) => [l.id, l.status]).sort()).toEqual(
      [
        [child, 'ok'],
        [parent, 'ok'],
      ].sort(),
    )
    const rebuilt = await rebuildIndex({ root })
    expect(rebuilt).toMatchObject({ root, listed: 2, read: 2, corrupt: 0, failed: 0 })
  })
})

describe('rootPermissionWarning', () => {
  it('warns when group or others can read the root, and not for 0700', () => {
    const root = join(scratchDir('dsh-host-'), 'open')
    mkdirSync(root, { mode: 0o755 })
    expect(rootPermissionWarning(root)).toMatch(/readable by other users \(mode 755\).*chmod 700/)
    const privateRoot = join(scratchDir('dsh-host-'), 'private')
    mkdirSync(privateRoot, { mode: 0o700 })
    expect(rootPermissionWarning(privateRoot)).toBeUndefined()
    expect(rootPermissionWarning(join(root, 'missing'))).toBeUndefined()
  })

  it('covers the derived directory through the root: enter-only roots warn, a private root keeps exposed derived files unreachable', async () => {
    const root = join(scratchDir('dsh-host-'), 'root')
    await populate(root)
    const derived = join(root, '.dsh')
    expect(statSync(derived).mode & 0o777).toBe(0o700)
    chmodSync(root, 0o711)
    expect(rootPermissionWarning(root)).toMatch(/mode 711/)
    chmodSync(root, 0o700)
    chmodSync(derived, 0o755)
    expect(rootPermissionWarning(root)).toBeUndefined()
  })
})

describe('requireExisting', () => {
  it('opens an existing root writable, and refuses a directory that is not one without creating anything', async () => {
    const dir = scratchDir('dsh-host-')
    const before = listTree(dir)
    await expectCode(createHost({ root: dir, requireExisting: true }), 'HOST_ROOT_INVALID')
    expect(listTree(dir)).toEqual(before)
    const root = join(dir, 'root')
    await populate(root)
    const host = await createHost({ root, requireExisting: true })
    try {
      expect(host.readOnly).toBe(false)
      expect(host.queryBackend).toBe('sqlite')
    } finally {
      await host.dispose()
    }
  })
})

describe('checkDerivedFiles', () => {
  it('quick_checks the index and the cache that exist, and creates none that do not', async () => {
    const root = join(scratchDir('dsh-host-'), 'root')
    await populate(root)
    const checks = await checkDerivedFiles(root)
    expect(checks.index).toEqual({ file: derivedPaths(root).index, status: 'ok' })
    expect(checks.projectionCache).toEqual({ file: derivedPaths(root).projectionCache, status: 'ok' })
    for (const file of Object.values(derivedPaths(root))) for (const suffix of ['', '-wal', '-shm']) rmSync(file + suffix, { force: true })
    const before = listTree(root)
    const absent = await checkDerivedFiles(root)
    expect([absent.index.status, absent.projectionCache.status]).toEqual(['absent', 'absent'])
    expect(listTree(root)).toEqual(before)
    await expectCode(checkDerivedFiles(scratchDir('dsh-host-')), 'HOST_ROOT_INVALID')
  })

  it('reports a damaged query index as damaged and leaves it as it is: no rebuild, no new file', async () => {
    const root = join(scratchDir('dsh-host-'), 'root')
    await populate(root)
    const file = realpathSync(derivedPaths(root).index)
    const bytes = readFileSync(file)
    expect(bytes.length).toBeGreaterThanOrEqual(2 * 4096)
    // Page 2 (SQLite's default page size is 4096) overwritten: quick_check fails.
    bytes.fill(0x5a, 4096, 8192)
    writeFileSync(file, bytes)
    const before = listTree(root)
    const checks = await checkDerivedFiles(root)
    expect(checks.index).toMatchObject({ file: derivedPaths(root).index, status: 'damaged', problem: expect.any(String) })
    expect(realpathSync(derivedPaths(root).index)).toBe(file)
    expect(readFileSync(file).equals(bytes)).toBe(true)
    expect(listTree(root)).toEqual(before)
  })

  it('reports a damaged projection cache as damaged and leaves the file as it is', async () => {
    const root = join(scratchDir('dsh-host-'), 'root')
    await populate(root)
    const file = derivedPaths(root).projectionCache
    const bytes = readFileSync(file)
    expect(bytes.length).toBeGreaterThanOrEqual(2 * 4096)
    // Page 2 (SQLite's default page size is 4096) overwritten: quick_check fails.
    bytes.fill(0x5a, 4096, 8192)
    writeFileSync(file, bytes)
    const checks = await checkDerivedFiles(root)
    expect(checks.projectionCache).toMatchObject({ file, status: 'damaged', problem: expect.any(String) })
    expect(readFileSync(file).equals(bytes)).toBe(true)
  })

  it("reports the readers' warnings about files they cannot open to the logger it is given, not the console", async () => {
    const root = join(scratchDir('dsh-host-'), 'root')
    await populate(root)
    const paths = derivedPaths(root)
    // Neither file is a database any more: each reader warns that it cannot open its file.
    for (const file of [paths.index, paths.projectionCache]) {
      for (const suffix of ['-wal', '-shm']) rmSync(file + suffix, { force: true })
      writeFileSync(realpathSync(file), Buffer.alloc(8192, 0x5a))
    }
    const said: string[] = []
    const logger: Logger = { warn: (message) => said.push(`warn ${message}`), error: (message) => said.push(`error ${message}`) }
    const consoleWarn = vi.spyOn(console, 'warn').mockImplementation(() => {})
    const consoleError = vi.spyOn(console, 'error').mockImplementation(() => {})
    onTestFinished(() => {
      consoleWarn.mockRestore()
      consoleError.mockRestore()
    })
    const checks = await checkDerivedFiles(root, { logger })
    expect([checks.index.status, checks.projectionCache.status]).toEqual(['damaged', 'damaged'])
    expect(said).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^warn dsh: the projection cache at .* cannot be opened/),
        expect.stringMatching(/^warn dsh: the session query index at .* cannot be read/),
      ]),
    )
    expect(consoleWarn).not.toHaveBeenCalled()
    expect(consoleError).not.toHaveBeenCalled()
  })
})
