// `@dsh/session-persistence/plugin`: the `sessionPersistence` plugin alone,
// for hosts that compose services and want nothing else of this package at
// startup (the coordinator it starts is loaded at activation).
export type { SessionPersistencePluginOptions } from './plugin.js'
export { sessionPersistencePlugin } from './plugin.js'
