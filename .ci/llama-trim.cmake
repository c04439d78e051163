# Included before every project() of the llama-cpp-python build (CMAKE_PROJECT_INCLUDE_BEFORE,
# set by the Makefile's llama-wheel target). llama-cpp-python forces llama.cpp's "common"
# library on, but its Python package never loads it (only libllama and libggml*): a normal
# variable in llama.cpp's directory scope turns it off, and with it about 45 compile steps.
set(LLAMA_BUILD_COMMON OFF)
