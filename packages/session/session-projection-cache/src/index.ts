export { SessionProjectionCacheError } from './errors.js'
export type { SessionProjectionCacheErrorCode } from './errors.js'
export type { SessionProjectionCache } from './types.js'
