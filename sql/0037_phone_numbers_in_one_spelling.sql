-- Phone numbers are stored in one spelling (a national prefix written after the country code dropped:
-- +330612345678 is +33612345678). The numbers stored before are rewritten by this migration's step in
-- TypeScript (src/db/numberSpelling.ts): the phone library's numbering plans cannot be written here.
-- Do-not-call entries that become the same number are merged.
select 1;
