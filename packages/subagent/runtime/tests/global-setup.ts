export { vitestGlobalSetup as default } from '@dsh/session-persistence-postgres/testing'
