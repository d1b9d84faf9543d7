# Symlinks every python/kerncheck/*.py, and the schemas/ folder, into the build tree's package folder
# (next to _core).
file(GLOB files RELATIVE ${SRC} ${SRC}/*.py)
file(MAKE_DIRECTORY ${DST})
foreach(f ${files})
  file(CREATE_LINK ${SRC}/${f} ${DST}/${f} SYMBOLIC)
endforeach()
if(IS_DIRECTORY ${SRC}/schemas AND NOT EXISTS ${DST}/schemas)
  file(CREATE_LINK ${SRC}/schemas ${DST}/schemas SYMBOLIC)
endif()
