import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createMemoryPersistence } from '@dsh/session-persistence'
import { sessionQueryContractSuite } from '@dsh/session-query/testing'
import { createSqliteSessionQuery } from '../src/index.js'

sessionQueryContractSuite('sqlite index over in-memory persistence', {
  async createPersistence() {
    const persistence = createMemoryPersistence()
    return { persistence, cleanup: () => persistence.close() }
  },
  async openQuery(sources) {
    const dir = mkdtempSync(join(tmpdir(), 'dsh-query-sqlite-'))
    const query = await createSqliteSessionQuery({
      ...sources,
      path: join(dir, '.dsh', 'index.sqlite'),
      logger: { warn: () => {}, error: () => {} },
    })
    const close = query.close.bind(query)
    return Object.assign(query, {
      async close() {
        await close()
        rmSync(dir, { recursive: true, force: true })
      },
    })
  },
  search: true,
})
