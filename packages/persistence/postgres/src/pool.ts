import type pg from 'pg'

/**
 * An idle pooled connection that the server drops (restart, terminate) makes
 * the pool emit `error`; unhandled, that would end the process. The pool
 * replaces the connection on its own, so the event only needs a listener.
 * Every package that reads through a shared pool calls this once per pool.
 */
export function watchPool(pool: pg.Pool): void {
  const marked = pool as pg.Pool & { dshWatched?: boolean }
  if (marked.dshWatched) return
  marked.dshWatched = true
  pool.on('error', () => {})
}
