import { tempDir } from '@dsh/test-kit'
import Database from 'better-sqlite3'
import { projectionCachePath, sessionProjectionCachePlugin } from '../src/index.js'
import { checkpointCacheSuite } from '../src/testing.js'

checkpointCacheSuite('sqlite', {
  async place() {
    const { dir, cleanup } = tempDir('dsh-cache-')
    return { place: projectionCachePath(dir), close: cleanup }
  },
  activate: (ctx, path, throttle) => ctx.activate(sessionProjectionCachePlugin({ path, throttle })),
  invalidOptionsCode: 'SESSION_PROJECTION_CACHE_INVALID_OPTIONS',
  async rowCount(path) {
    const db = new Database(path, { readonly: true })
    try {
      return db.prepare('SELECT count(*) FROM checkpoint_rows').pluck().get() as number
    } finally {
      db.close()
    }
  },
})
