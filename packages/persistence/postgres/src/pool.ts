import type pg from 'pg'

const ignore = () => {}

/**
 * Keeps a pool's dropped connections (server restart, terminate) from ending
 * the process; their holders learn of the loss from their next statement, and
 * the pool replaces the connection on its own.
 *
 * - An idle connection's error reaches the pool as `error`: one listener.
 * - A connection checked out has only its holder's listener, attached once
 *   `pool.connect()` has resolved. A new connection's first packet can carry
 *   both its ReadyForQuery and the server's FATAL (a busy process reads the
 *   two together); the driver then emits the FATAL while the connection is
 *   already handed out and before its holder can listen. So every new
 *   connection gets a listener of its own as the pool creates it.
 *
 * Every package that reads through a shared pool calls this once per pool.
 */
export function watchPool(pool: pg.Pool): void {
  const marked = pool as pg.Pool & { dshWatched?: boolean }
  if (marked.dshWatched) return
  marked.dshWatched = true
  pool.on('error', ignore)
  pool.on('connect', (client) => client.on('error', ignore))
}
