import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { createHost } from '../src/index.js'

const dirs: string[] = []
function tempRoot(): string {
  const dir = mkdtempSync(join(tmpdir(), 'dsh-host-'))
  dirs.push(dir)
  return join(dir, 'root')
}
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

describe('createHost', () => {
  it('runs the README composition example and keeps everything under the root', async () => {
    const root = tempRoot()
    const host = await createHost({ root })
    const parent = host.sessions.create({ cwd: process.cwd() })
    parent.append('user/message', { text: 'hello' })
    const child = host.subagents.spawn(parent, { mode: 'continuable', label: 'helper', context: 'fresh', prompt: 'help' })
    await child.done
    const rows = await host.subagents.listChildren(parent.id)
    expect(rows).toEqual([{ kind: 'child', id: child.id, activity: 'inactive', hasChildren: false, mode: 'continuable', label: 'helper' }])
    await host.dispose()
    expect(existsSync(join(root, '.cache', 'projections.sqlite'))).toBe(true)
    expect(existsSync(join(root, '.index', 'query.sqlite'))).toBe(true)

    // A second process-lifetime sees the same catalog, cold.
    const again = await createHost({ root, query: 'memory', projectionCache: false })
    try {
      expect(await again.subagents.listChildren(parent.id)).toEqual(rows)
      expect(again.cache).toBeUndefined()
      const restored = again.sessions.restore(await again.persistence.load(parent.id))
      expect(restored.events.map((e) => e.type)).toEqual(['user/message'])
    } finally {
      await again.dispose()
    }
  })
})
